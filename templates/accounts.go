package templates

// Accounts is the admin page's account control: every user with their
// state and API tokens, and what an admin may do to each.
type Accounts struct {
	Users []AccountRow
}

// AccountRow is one account on the admin page.
type AccountRow struct {
	Name, Role, Team string
	// UnixName is the account their jobs run as; Source where they sign
	// in (local, ldap, oidc).
	UnixName, Source string
	// Disabled, with a note saying when and by whom.
	Disabled     bool
	DisabledNote string
	// Self: the admin looking at the page, who may not disable or delete
	// their own account.
	Self   bool
	Tokens []TokenRow
}
