package wasm_test

import (
	"context"
	"fmt"

	"github.com/acpflow/acpflow/wasm"
)

func ExampleHost_Load() {
	ctx := context.Background()
	host, err := wasm.NewHost(ctx) // one per process; compiled modules are cached
	if err != nil {
		panic(err)
	}
	defer host.Close(ctx)

	module, err := host.Load(ctx, "examples/prebuilt/c.wasm", wasm.Limits{}) // defaults: 32 MiB, 1s, 1 MiB
	if err != nil {
		panic(err)
	}
	answer, _, err := module.Call(ctx, "permission", []byte(`{"kind":"permission","tool":{"kind":"read"}}`))
	fmt.Println(string(answer), err)
	// Output: {"decision":"allow","reason":"read-only tool"} <nil>
}

func ExampleModule_Call_failure() {
	ctx := context.Background()
	host, err := wasm.NewHost(ctx)
	if err != nil {
		panic(err)
	}
	defer host.Close(ctx)

	module, err := host.Load(ctx, "testdata/exit1.wasm", wasm.Limits{})
	if err != nil {
		panic(err)
	}
	_, stderr, err := module.Call(ctx, "permission", []byte(`{}`))
	fmt.Println(err)
	fmt.Printf("%q\n", stderr)
	// Output:
	// policy module testdata/exit1.wasm exited with code 1 (stderr: malformed request)
	// "malformed request\n"
}
