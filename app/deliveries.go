package app

import (
	"cmp"
	"path/filepath"
	"strings"

	"sheetq/jobs/deliver"
	"sheetq/store"
)

// DeliveriesConfig is the [deliveries] table: where a schedule's files may go.
type DeliveriesConfig struct {
	// Folders are the folders (and the folders below them) that folder targets may
	// write to; none: folder targets are refused.
	Folders []string `toml:"folders"`
	// AttachLimit is the largest file, in bytes, that an email carries attached; a
	// larger one is sent as a link to its download (default 10 MB, 10485760).
	AttachLimit int64 `toml:"attach_limit"`
	// EmailDomains are the domains a member's schedule may mail (issue 39): "example.com"
	// allows anyone@example.com; none: any address. Admins' schedules may mail anyone.
	EmailDomains []string `toml:"email_domains"`
	// PasswordFolders are the folders (and the folders below them) that a target's
	// "password": "file:PATH" may be read from; none: passwords come only from
	// environment variables named SHEETQ_PASSWORD_<NAME>.
	PasswordFolders []string `toml:"password_folders"`
}

// checkEmailDomains refuses an [deliveries] email_domains entry that is no domain.
func (fc FileConfig) checkEmailDomains() error {
	for _, d := range fc.Deliveries.EmailDomains {
		d = strings.TrimPrefix(d, "@")
		if d == "" || len(d) > 253 || strings.ContainsAny(d, "@ \t/:") || strings.HasPrefix(d, ".") || strings.HasSuffix(d, ".") {
			return fc.Errorf("[deliveries] email_domains: %q is not a domain, such as \"example.com\"", d)
		}
	}
	return nil
}

// withDeliveries is the store's follow-up hook (rule 19): the webhook announcer's
// follow-ups of a job's end, plus, for an export with delivery targets that succeeded,
// one delivery job per target (webhook targets through the announcer, so that they are
// signed webhooks like any other).
func withDeliveries(announce store.FollowUpFunc) store.FollowUpFunc {
	plan := deliver.Planner{Webhook: announce}.FollowUps
	return func(job store.Job) ([]store.FollowUp, error) {
		fus, err := announce(job)
		if err != nil {
			return nil, err
		}
		more, err := plan(job)
		if err != nil {
			return nil, err
		}
		return append(fus, more...), nil
	}
}

// openDeliveries builds the delivery kind from the config file's [smtp] and
// [deliveries] tables. It is registered even without them, so that a delivery queued
// under an earlier config fails with a clear error instead of an unknown kind.
func (a *App) openDeliveries(fc FileConfig) (*deliver.Handler, error) {
	smtp, err := fc.SMTP.Resolved()
	if err != nil {
		return nil, fc.Errorf("%w", err)
	}
	if smtp.CAFile != "" && !filepath.IsAbs(smtp.CAFile) {
		// Relative to the config file's folder, like the file's other paths.
		smtp.CAFile = filepath.Join(filepath.Dir(cmp.Or(a.cfg.ConfigFile, a.dir.Config())), smtp.CAFile)
	}
	if err := fc.checkEmailDomains(); err != nil {
		return nil, err
	}
	if fc.Deliveries.AttachLimit < 0 {
		return nil, fc.Errorf("[deliveries] attach_limit must be a number of bytes, not %d", fc.Deliveries.AttachLimit)
	}
	h, err := deliver.New(deliver.Config{
		SMTP: smtp, Folders: fc.Deliveries.Folders, AttachLimit: fc.Deliveries.AttachLimit, BaseURL: a.cfg.BaseURL,
		PasswordFolders: fc.Deliveries.PasswordFolders,
		Files:           a.files, Recorder: a.store, Observe: a.metrics.Deliveries(), Logger: a.log, Now: a.test.Now,
	})
	if err != nil {
		return nil, fc.Errorf("%w", err) // [smtp] or [deliveries]: their errors name the key
	}
	return h, nil
}
