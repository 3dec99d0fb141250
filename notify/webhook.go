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
	"time"

	"github.com/gpuportal/gpuportal/outbound"
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

// Webhook posts payloads to users' webhook URLs, only where its policy
// allows (package outbound).
type Webhook struct {
	Client *http.Client
}

// NewWebhook is a Webhook whose requests connect only where allow
// allows (nil: the Internet's addresses), give up after timeout, and
// follow no redirects.
func NewWebhook(timeout time.Duration, allow *outbound.Policy) *Webhook {
	return &Webhook{Client: &http.Client{
		Transport:     allow.Transport(),
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// The outcomes of a failed delivery as the user's delivery log shows
// them. They tell the user no more than whether the receiver answered:
// never its answer's body, and for an address the server refuses only
// that it refused it, which it does without connecting, so that the log
// maps no ports of the server's network.
const (
	refusedMsg  = "refused: address not allowed"
	failedMsg   = "connection failed"
	timeoutMsg  = "no answer within the time limit (timeout)"
	badURLMsg   = "bad webhook URL"
	answeredFmt = "the receiver answered %d %s"
)

// DeliveryError is a failed delivery: Error is what the user's delivery
// log shows; Unwrap the cause, for the operator's log.
type DeliveryError struct {
	Shown string
	Cause error
}

func (e *DeliveryError) Error() string { return e.Shown }
func (e *DeliveryError) Unwrap() error { return e.Cause }

// Post sends p to target, signed with secret when there is one. Its
// errors are *DeliveryError, and never contain target, which may hold a
// token (Slack's do).
func (w *Webhook) Post(ctx context.Context, target, secret string, delivery int64, at time.Time, p Payload) error {
	body, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode payload: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return &DeliveryError{Shown: badURLMsg}
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
		return deliveryError(err)
	}
	defer resp.Body.Close()
	// Read a little of the answer, never shown, so that the connection
	// may be used again.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &DeliveryError{Shown: fmt.Sprintf(answeredFmt, resp.StatusCode, http.StatusText(resp.StatusCode))}
	}
	return nil
}

// deliveryError is what the user is told of a request that got no
// answer, with its cause without the URL that net/http puts in its
// errors.
func deliveryError(err error) *DeliveryError {
	cause := err
	var ue *url.Error
	if errors.As(err, &ue) {
		cause = ue.Err
	}
	switch {
	case outbound.Refused(err):
		return &DeliveryError{Shown: refusedMsg, Cause: cause}
	case ue != nil && ue.Timeout():
		return &DeliveryError{Shown: timeoutMsg, Cause: cause}
	}
	return &DeliveryError{Shown: failedMsg, Cause: cause}
}
