package web

import (
	"net/http"
	"time"

	"sheetq/jobs/schedule"
	"sheetq/ui"
)

// zoneCookie holds the viewer's IANA time zone ("Europe/Berlin"), which the pages'
// script sets from the browser's (assets/static/app.js, "times in the viewer's zone").
// Pages write every time in it (issue 37); without it, or with a zone this server does
// not know, they write UTC and say so.
const zoneCookie = "tz"

// viewerZone is the zone the pages write r's times in, and its name.
func viewerZone(r *http.Request) (*time.Location, string) {
	if c, err := r.Cookie(zoneCookie); err == nil {
		if loc, err := schedule.LoadZone(c.Value); err == nil {
			return loc, c.Value
		}
	}
	return time.UTC, "UTC"
}

// times is how r's page writes its times: in the viewer's zone, named as it is now.
func (p *Pages) times(r *http.Request) ui.Times {
	loc, _ := viewerZone(r)
	return ui.TimesIn(loc, p.store.Now())
}
