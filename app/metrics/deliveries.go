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
