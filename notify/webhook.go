package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The headers of a webhook request. With a secret, SignatureHeader is
// "sha256=" and the hex HMAC-SHA256, keyed by the secret, of
// TimestampHeader's value, a dot, and the body: a receiver recomputes it
// and compares, and refuses old timestamps to stop replays.
const (
	SignatureHeader = "X-Gpuportal-Signature"
	TimestampHeader = "X-Gpuportal-Timestamp"
	// DeliveryHeader numbers the notification: a retry carries the same.
	DeliveryHeader = "X-Gpuportal-Delivery"
	EventHeader    = "X-Gpuportal-Event"
)

// Sign is the SignatureHeader value of body sent at ts with secret.
func Sign(secret string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strconv.FormatInt(ts, 10)))
	mac.Write([]byte("."))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Verify reports whether sig is the signature of body sent at ts.
func Verify(secret string, ts int64, body []byte, sig string) bool {
	return hmac.Equal([]byte(Sign(secret, ts, body)), []byte(sig))
}

// Webhook posts payloads to users' webhook URLs.
type Webhook struct {
	Client *http.Client
}

// NewWebhook is a Webhook whose requests give up after timeout and
// follow no redirects.
func NewWebhook(timeout time.Duration) *Webhook {
	return &Webhook{Client: &http.Client{
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// Post sends p to target, signed with secret when there is one. Its
// errors never contain target, which may hold a token (Slack's do).
func (w *Webhook) Post(ctx context.Context, target, secret string, delivery int64, at time.Time, p Payload) error {
	body, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode payload: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return errors.New("bad webhook URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "gpuportal-notify")
	req.Header.Set(DeliveryHeader, strconv.FormatInt(delivery, 10))
	req.Header.Set(EventHeader, p.Event)
	if secret != "" {
		ts := at.Unix()
		req.Header.Set(TimestampHeader, strconv.FormatInt(ts, 10))
		req.Header.Set(SignatureHeader, Sign(secret, ts, body))
	}
	resp, err := w.Client.Do(req)
	if err != nil {
		return fmt.Errorf("could not reach the receiver: %w", withoutURL(err))
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		s := fmt.Sprintf("the receiver answered %s", resp.Status)
		if m := strings.TrimSpace(oneLine(string(msg), 160)); m != "" {
			s += ": " + m
		}
		return errors.New(s)
	}
	return nil
}

// withoutURL is err without the URL that net/http puts in its errors.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return errors.New("no answer within the time limit (timeout)")
		}
		return ue.Err
	}
	return err
}
