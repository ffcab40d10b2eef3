package httpapitest

import (
	"strconv"
	"time"
)

// Keys are a row's keys in the order the API sends them. Row 0 has no "meta"; row 1 is
// the first that does.
var Keys = []string{"id", "name", "amount", "paid", "day", "note", "ref", "meta"}

// Row is one row of the dataset. Row i is a function of i alone.
type Row struct {
	ID     int64   // i+1
	Name   string  // text, some of it needing JSON escapes or outside ASCII
	Amount float64 // never a whole number, so it reads back as a float
	Paid   bool
	Day    string // a date, 2006-01-02
	Note   *string
	Ref    int64 // above 2^53: exact only if read as an integer
	Meta   *Meta // nil: the key is absent
}

// Meta is a row's nested object.
type Meta struct {
	Level int
	Tags  []string
}

// MetaJSON is m as the API sends it: compact, keys in sorted order.
func (m Meta) MetaJSON() string {
	b := append([]byte(`{"level":`), strconv.Itoa(m.Level)...)
	b = append(b, `,"tags":[`...)
	for i, t := range m.Tags {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, t)
	}
	return string(append(b, "]}"...))
}

var (
	names    = []string{"Ada Lovelace", `Grace "Amazing" Hopper`, "Zoë Ångström", "李小龙", "tab\there", "Edsger Dijkstra", `back\slash`}
	tags     = []string{"red", "green", "blue"}
	firstDay = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
)

// RowAt returns row i of the dataset (from 0).
func RowAt(i int) Row {
	r := Row{
		ID:     int64(i) + 1,
		Name:   names[i%len(names)] + " #" + strconv.Itoa(i),
		Amount: float64(i%10_000) + 0.25*float64(1+i%3),
		Paid:   i%3 == 0,
		Day:    firstDay.AddDate(0, 0, i%366).Format(time.DateOnly),
		Ref:    9_007_199_254_740_993 + int64(i),
	}
	if i%5 != 0 {
		note := "note " + strconv.Itoa(i%97)
		r.Note = &note
	}
	if i%4 == 1 {
		r.Meta = &Meta{Level: i % 7, Tags: tags[:1+i%3]}
	}
	return r
}

// AppendRow appends row i as the API sends it: a JSON object, keys in Keys' order,
// "note" null when Note is nil, "meta" absent when Meta is.
func AppendRow(b []byte, i int) []byte {
	r := RowAt(i)
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, r.ID, 10)
	b = append(b, `,"name":`...)
	b = appendString(b, r.Name)
	b = append(b, `,"amount":`...)
	b = strconv.AppendFloat(b, r.Amount, 'f', -1, 64)
	b = append(b, `,"paid":`...)
	b = strconv.AppendBool(b, r.Paid)
	b = append(b, `,"day":"`...)
	b = append(b, r.Day...)
	b = append(b, `","note":`...)
	if r.Note == nil {
		b = append(b, "null"...)
	} else {
		b = appendString(b, *r.Note)
	}
	b = append(b, `,"ref":`...)
	b = strconv.AppendInt(b, r.Ref, 10)
	if r.Meta != nil {
		b = append(b, `,"meta":`...)
		b = append(b, r.Meta.MetaJSON()...)
	}
	return append(b, '}')
}
