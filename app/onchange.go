package app

import "sheetq/store"

// onChangeAll fans the engine's single state-change hook (jobs.Config.OnChange) out to
// every listener given, in order; nil listeners are skipped. Each listener runs on the
// engine's goroutine, so each must be quick.
func onChangeAll(fns ...func(store.Job)) func(store.Job) {
	var live []func(store.Job)
	for _, fn := range fns {
		if fn != nil {
			live = append(live, fn)
		}
	}
	return func(j store.Job) {
		for _, fn := range live {
			fn(j)
		}
	}
}
