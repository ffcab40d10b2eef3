package webhook

// DialControl is the dial-time address check, for tests that give it raw addresses.
var DialControl = dialControl
