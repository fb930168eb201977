package termtext_test

import (
	"fmt"

	"github.com/acpflow/acpflow/internal/termtext"
)

func ExampleSanitize() {
	agent := "done\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J, ring\x07"
	fmt.Printf("%q\n", termtext.Sanitize(agent))
	// Output: "done, ring␇"
}

func ExampleStripANSI() {
	fmt.Println(termtext.StripANSI("\x1b[1;31merror:\x1b[0m model overloaded"))
	// Output: error: model overloaded
}

func ExampleQuote() {
	name := "Reject\r\n  1) Allow once"
	fmt.Printf("  3) %s (reject_once)\n", termtext.Quote(name, 100))
	// Output:   3) "Reject\r\n  1) Allow once" (reject_once)
}
