package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// secretPrefix marks a Standard Webhooks secret; the rest is the base64 key.
const secretPrefix = "whsec_"

// ParseSecret decodes a "whsec_<base64>" secret into the HMAC key. The prefix may be
// left out, as the Standard Webhooks libraries allow. The key must be 24 to 64 bytes.
func ParseSecret(secret string) ([]byte, error) {
	b64 := strings.TrimPrefix(strings.TrimSpace(secret), secretPrefix)
	if b64 == "" {
		return nil, errors.New("secret is empty")
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(b64)
	}
	if err != nil {
		// The error would quote the secret; say where instead.
		return nil, errors.New(`secret is not "whsec_" followed by base64`)
	}
	if len(key) < 24 || len(key) > 64 {
		return nil, fmt.Errorf("secret key is %d bytes, want 24 to 64 (generate one with: openssl rand -base64 32)", len(key))
	}
	return key, nil
}

// Sign returns the webhook-signature header value for one delivery attempt:
// "v1," + base64(HMAC-SHA256(key, id + "." + unix seconds + "." + body)).
func Sign(key []byte, id string, ts time.Time, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte("."))
	mac.Write([]byte(strconv.FormatInt(ts.Unix(), 10)))
	mac.Write([]byte("."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
