package policies

import (
	"strings"
	"unicode"
)

// IsCredential reports whether an environment variable's name marks it as a
// secret that a child agent should not inherit by default (docs/policies.md#env-policies, the
// credential rule). The test is on the name alone, case-insensitively:
//
//   - the name contains KEY, SECRET, TOKEN, PASSWORD (the seed's rule, kept
//     as the floor), PASSWD, PASSPHRASE, CREDENTIAL, PRIVATE or
//     CONNECTION_STRING;
//   - or one of its words is AUTH, PASS, PWD, PAT, DSN or JWT, or starts with
//     WEBHOOK (words are the runs of letters and digits between other
//     characters), except the shell's own PWD;
//   - or it is a URL or URI of a data store (a word URL or URI, with a word
//     that starts with DATABASE, POSTGRES, MYSQL, MARIADB, REDIS, MONGO or
//     RABBITMQ, or ends with DB or AMQP): such URLs carry the password;
//   - or it is a session of a password manager's CLI (BW_SESSION,
//     OP_SESSION_*).
//
// # Notes
//
// The substrings are matched anywhere, as the seed did, so some names that
// hold no secret are dropped too (KEYBOARD_*, TOKENIZERS_PARALLELISM,
// SSH_AUTH_SOCK, ...). That is the accepted price of never passing less
// than the seed scrubbed; DESIGN.md lists the known cases. A user keeps such
// a variable with an env rule or by setting it explicitly.
func IsCredential(name string) bool {
	upper := strings.ToUpper(name)
	for _, s := range []string{
		"KEY", "SECRET", "TOKEN", "PASSWORD", // the seed's floor
		"PASSWD", "PASSPHRASE", "CREDENTIAL", "PRIVATE",
		"CONNECTION_STRING", "CONNECTIONSTRING",
	} {
		if strings.Contains(upper, s) {
			return true
		}
	}
	if upper == "BW_SESSION" || strings.HasPrefix(upper, "OP_SESSION_") {
		return true
	}
	words := strings.FieldsFunc(upper, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	var url, store bool
	for _, w := range words {
		switch w {
		case "AUTH", "PASS", "PAT", "DSN", "JWT":
			return true
		case "PWD":
			if upper != "PWD" {
				return true
			}
		case "URL", "URI":
			url = true
		}
		if strings.HasPrefix(w, "WEBHOOK") {
			return true
		}
		store = store || isDataStore(w)
	}
	return url && store
}

// isDataStore reports whether a word of a variable name names a data store
// whose connection URL embeds credentials: DATABASE, POSTGRESQL, MONGODB,
// REDISCLOUD, JAWSDB, CLOUDAMQP, ...
func isDataStore(word string) bool {
	for _, p := range []string{"DATABASE", "POSTGRES", "MYSQL", "MARIADB", "REDIS", "MONGO", "RABBITMQ"} {
		if strings.HasPrefix(word, p) {
			return true
		}
	}
	return strings.HasSuffix(word, "DB") || strings.HasSuffix(word, "AMQP")
}
