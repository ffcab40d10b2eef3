package apptest

import (
	"bytes"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
)

// Page parses an HTML answer, requiring the status and an HTML content type.
func Page(t testing.TB, res Response, status int) *goquery.Document {
	t.Helper()
	if res.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d; body:\n%s", res.Request.Method, res.Request.URL.Path, res.StatusCode, status, res.Body)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Fatalf("Content-Type %q, want text/html", ct)
	}
	doc, err := goquery.NewDocumentFromReader(bytes.NewReader(res.Body))
	if err != nil {
		t.Fatalf("parse HTML: %v", err)
	}
	return doc
}

// TID selects the elements with a data-testid.
func TID(s interface {
	Find(string) *goquery.Selection
}, id string) *goquery.Selection {
	return s.Find(`[data-testid="` + id + `"]`)
}

// PostForm sends a urlencoded form with extra headers (Origin, Sec-Fetch-Site) and does
// not follow redirects, so the 303 itself can be checked.
func (c *Client) PostForm(path string, form url.Values, header http.Header) Response {
	c.T.Helper()
	req, err := http.NewRequest(http.MethodPost, c.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		c.T.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	hc := *c.HC
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := hc.Do(req)
	if err != nil {
		c.T.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	return Response{Response: res, Body: b.Bytes()}
}

// FormOf reads the export form of a report page: its hidden fields and defaults.
func FormOf(t testing.TB, doc *goquery.Document) url.Values {
	t.Helper()
	form := TID(doc, "export-form")
	if form.Length() != 1 {
		t.Fatalf("no export-form")
	}
	if m, _ := form.Attr("method"); m != "post" {
		t.Errorf("form method %q", m)
	}
	if a, _ := form.Attr("action"); a != "/exports" {
		t.Errorf("form action %q", a)
	}
	v := url.Values{}
	form.Find("input").Each(func(_ int, in *goquery.Selection) {
		name, _ := in.Attr("name")
		val, _ := in.Attr("value")
		if typ, _ := in.Attr("type"); typ == "checkbox" {
			if _, on := in.Attr("checked"); !on {
				return
			}
		}
		v.Set(name, val)
	})
	return v
}

// WaitReport waits until the report page of report id answers 200, that is until the
// catalog serves it.
func (c *Client) WaitReport(id string) {
	c.T.Helper()
	WaitFor(c.T, 10*time.Second, func() (bool, string) {
		res := c.Get("/exports/new?report=" + id)
		return res.StatusCode == http.StatusOK, id + " not loaded: " + strconv.Itoa(res.StatusCode)
	})
}
