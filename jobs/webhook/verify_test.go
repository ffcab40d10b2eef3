package webhook

import (
	"crypto/hmac"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Verify checks a delivery the way a receiver does (for the tests: a receiver uses its
// own Standard Webhooks library): one of the space-separated v1
// signatures must match, and the timestamp must be within tolerance of now.
func Verify(key []byte, id, timestamp, signatures string, body []byte, now time.Time, tolerance time.Duration) error {
	sec, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("bad webhook-timestamp %q", timestamp)
	}
	ts := time.Unix(sec, 0)
	if d := now.Sub(ts); d > tolerance || d < -tolerance {
		return fmt.Errorf("webhook-timestamp %s is %s away from now", timestamp, d)
	}
	want := Sign(key, id, ts, body)
	for _, sig := range strings.Fields(signatures) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return errors.New("no matching signature")
}
