//go:build !race

package export

// raceEnabled says the tests run under the race detector, which makes the biggest
// exports several times slower; those tests take fewer rows then.
const raceEnabled = false
