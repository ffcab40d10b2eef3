package pg

// UnreadableJSON is unreadableJSON, for its comparison with the server in pg_test.
var UnreadableJSON = unreadableJSON
