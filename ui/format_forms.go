package ui

import "strconv"

// RunEstimate is the New export form's guess of an export before it starts: its rows, file
// size and run time from earlier runs of the report, and its place in its queue.
type RunEstimate struct {
	// Rows, Size and RunTime are written for people; empty without earlier runs.
	Rows, Size, RunTime string
	// RowsN is Rows as a number, for tests and scripts.
	RowsN int64
	// Runs is how many runs the figures come from; Basis says which ("from 3 runs with
	// these parameters").
	Runs  int
	Basis string
	// Refused is set when the form would refuse the values: no figures are given for them.
	Refused bool
	// Queue is the queue the export would join; Ahead is how many of its jobs wait
	// (PENDING), Busy and Workers its workers on this server.
	Queue                string
	Ahead, Busy, Workers int
}

// QueueText says where the export would stand in its queue.
func (e RunEstimate) QueueText() string {
	lane := "the " + e.Queue + " queue"
	switch {
	case e.Workers == 0:
		return "No worker on this server runs " + lane + "; " + waiting(e.Ahead) + "."
	case e.Ahead == 0 && e.Busy < e.Workers:
		return "It would start at once: " + strconv.Itoa(e.Busy) + " of " + strconv.Itoa(e.Workers) +
			" workers of " + lane + " busy."
	}
	return "It would be number " + strconv.Itoa(e.Ahead+1) + " in " + lane + ": " + waiting(e.Ahead) + " ahead of it, " +
		strconv.Itoa(e.Busy) + " of " + strconv.Itoa(e.Workers) + " workers busy."
}

// Position is the place the export would take in its queue, 1 for the first.
func (e RunEstimate) Position() int { return e.Ahead + 1 }

func waiting(n int) string {
	switch n {
	case 0:
		return "none waiting"
	case 1:
		return "1 export waiting"
	}
	return Count(int64(n)) + " exports waiting"
}
