package policies

import "testing"

// TestIsCredentialEdges pins the edges of each clause of the rule; the
// corpus test covers the real names.
func TestIsCredentialEdges(t *testing.T) {
	tests := []struct {
		name string
		drop bool
		why  string
	}{
		{"api_key", true, "the substrings are matched case-insensitively"},
		{"MyPasswd", true, "PASSWD is matched inside a word"},
		{"DEPLOY_PASSPHRASE", true, "PASSPHRASE is matched inside a word"},
		{"GITHUB_APP_PRIVATE", true, "PRIVATE is matched anywhere"},
		{"AzureStorageConnectionString", true, "a connection string in camel case is matched"},
		{"AUTH", true, "AUTH alone is a word"},
		{"GH_AUTH", true, "AUTH after an underscore is a word"},
		{"AUTH_HEADER", true, "AUTH before an underscore is a word"},
		{"my-auth.header", true, "dashes and dots separate words too"},
		{"basic_auth", true, "AUTH as a word is matched case-insensitively"},
		{"GIT_AUTHOR_NAME", false, "AUTHOR is not AUTH as a word"},
		{"OAUTH_CLIENT_ID", false, "OAUTH is not AUTH as a word, and a client id is not a secret"},
		{"AUTH2_MODE", false, "digits belong to the word, so AUTH2 is not AUTH"},
		{"SMTP_PASS", true, "PASS as a word is a password"},
		{"BYPASS_CACHE", false, "BYPASS is not PASS as a word"},
		{"GIT_ASKPASS", false, "ASKPASS names a program, not a password"},
		{"MYSQL_PWD", true, "PWD as a word in a longer name is a password"},
		{"PWD", false, "the shell's own PWD is the working directory"},
		{"pwd", false, "the working directory in any case"},
		{"OLDPWD", false, "OLDPWD is the previous directory, and not PWD as a word"},
		{"GITHUB_PAT", true, "PAT as a word is a personal access token"},
		{"PATH", false, "PATH is not PAT as a word"},
		{"PATTERN_FILE", false, "PATTERN is not PAT as a word"},
		{"SENTRY_DSN", true, "DSN as a word is a connection string"},
		{"CI_JOB_JWT", true, "JWT as a word is a bearer token"},
		{"DATABASE_URL", true, "a database URL carries its password"},
		{"DATABASE_HOST", false, "a database host is not a URL"},
		{"COUCHDB_URL", true, "a word ending in DB names a data store"},
		{"DBT_CLOUD_URL", false, "a word that merely starts with DB does not"},
		{"FEEDBACK_URL", false, "DB inside a word does not"},
		{"REDIS_HOST", false, "a data store's host alone is kept"},
		{"REDISCLOUD_URL", true, "a word starting with REDIS names a data store"},
		{"CLOUDAMQP_URL", true, "a word ending in AMQP names a broker"},
		{"MONGODB_URI", true, "URI counts like URL"},
		{"SUPABASE_URL", false, "SUPABASE does not name a data store by this rule"},
		{"WEBHOOK_URL", true, "a webhook URL is a bearer secret"},
		{"SLACK_WEBHOOKS", true, "a word starting with WEBHOOK"},
		{"BW_SESSION", true, "the Bitwarden CLI's session key"},
		{"OP_SESSION_team", true, "a 1Password CLI session, whatever the account"},
		{"SESSION_ID", false, "SESSION alone is not a secret"},
		{"ACPFLOW_TOKEN", true, "the rule does not care about acpflow's prefix"},
		{"", false, "an empty name holds nothing"},
		{"HTTPS_PROXY", false, "proxy settings are kept even though a proxy URL may hold a password (a known miss)"},
		{"PIP_EXTRA_INDEX_URL", false, "a package index URL is a setting like a proxy (a known miss)"},
		{"NONCE_SALT", false, "a name that says nothing about a secret passes (a known miss)"},
		{"AzureWebJobsStorage", false, "a connection string under an opaque name passes (a known miss)"},
		{"KV_URL", false, "a store URL under an opaque name passes (a known miss)"},
	}
	for _, tt := range tests {
		verb := "is kept"
		if tt.drop {
			verb = "is dropped"
		}
		t.Run(tt.name+" "+verb+": "+tt.why, func(t *testing.T) {
			if got := IsCredential(tt.name); got != tt.drop {
				t.Errorf("IsCredential(%q) = %v, want %v", tt.name, got, tt.drop)
			}
		})
	}
}
