package metrics

import "github.com/prometheus/client_golang/prometheus"

// Deliveries registers sheetq_deliveries_total, the delivery attempts of scheduled
// exports by target type (email, folder) and outcome (delivered, retrying, failed: for
// good), and returns the function that counts one (deliver.Config.Observe). A delivery
// that keeps failing shows as a rising retrying count, then a failed one. Call it once.
func (m *Metrics) Deliveries() func(typ, outcome string) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "sheetq", Name: "deliveries_total",
		Help: "Delivery attempts of exports' files (email, folder), by target type and outcome (delivered, retrying, failed)."},
		[]string{"type", "outcome"})
	m.reg.MustRegister(c)
	return func(typ, outcome string) { c.WithLabelValues(typ, outcome).Inc() }
}

// Resumes registers sheetq_resumes_total and sheetq_resumed_rows_total, the attempts in
// this process that continued from an earlier attempt's checkpoint and the rows they
// kept instead of writing again, and returns the function that counts one
// (jobs.Config.OnResumed). Call it once.
func (m *Metrics) Resumes() func(kind string, rows int64) {
	resumes := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "sheetq", Name: "resumes_total",
		Help: "Attempts that continued from an earlier attempt's checkpoint instead of starting again, by kind."},
		[]string{"kind"})
	saved := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "sheetq", Name: "resumed_rows_total",
		Help: "Rows that resumed attempts kept from the checkpoint they continued from (work not done again), by kind."},
		[]string{"kind"})
	m.reg.MustRegister(resumes, saved)
	return func(kind string, rows int64) {
		resumes.WithLabelValues(kind).Inc()
		saved.WithLabelValues(kind).Add(float64(rows))
	}
}
