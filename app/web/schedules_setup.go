package web

// The config lines that the schedule form shows beside Email and Folder when this server
// cannot deliver there yet (docs/schedules.md, "Delivering a schedule's file").
const (
	smtpSetup    = "[smtp]\nhost = \"smtp.example.com\"\nfrom = \"sheetq <reports@example.com>\""
	foldersSetup = "[deliveries]\nfolders = [\"/srv/reports\"]"
)

// deliverySetup is the config lines that email and folder deliveries still need on this
// server, "" for one it can already deliver to: the settings the deliveries' own check
// refuses a schedule without, when it is saved.
func (p *Pages) deliverySetup() (email, folder string) {
	d := p.cfg.Deliveries
	if d == nil {
		return "", ""
	}
	if !d.CanEmail() {
		email = smtpSetup
	}
	if !d.CanCopy() {
		folder = foldersSetup
	}
	return email, folder
}
