package app

// onChangeAll fans the engine's single change hook (jobs.Config.OnChange, a wake-up that
// carries no data) out to every listener given, in order; nil listeners are skipped.
// Each listener runs on the engine's goroutine, so each must be quick.
func onChangeAll(fns ...func()) func() {
	var live []func()
	for _, fn := range fns {
		if fn != nil {
			live = append(live, fn)
		}
	}
	return func() {
		for _, fn := range live {
			fn()
		}
	}
}
