package store

// SetMutant breaks the core's rule that name names ("" keeps them all), for the
// mutation tests (mutants_test.go).
func SetMutant(name string) { mutant = name }
