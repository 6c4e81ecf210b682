package backend

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/dsyncgo/dsync"
)

// The helpers below are for adapters: the translations every client
// library needs, written once.

// NormalizeReply converts a reply as a client library decoded it into the
// shapes of rule 2: nil stays nil, integers become int64, strings and
// []byte become string, arrays ([]any) are normalized element by element.
// Over RESP3 a script's true arrives as a boolean and its numbers may
// arrive as doubles: true becomes int64(1), false nil, and a float64 is
// truncated to int64, the shapes RESP2 gives and dsync's scripts assume.
//
// serverError recognizes the client's value for an error reply (inside an
// array, where clients leave it as a value) and returns its text, which
// becomes a *ServerError. Any other type is an error matching
// dsync.ErrUnexpectedReply.
func NormalizeReply(v any, serverError func(v any) (string, bool)) (any, error) {
	switch v := v.(type) {
	case nil, int64, string:
		return v, nil
	case []byte:
		return string(v), nil
	case bool:
		if v {
			return int64(1), nil
		}
		return nil, nil
	case float64:
		if v >= math.MinInt64 && v <= math.MaxInt64 {
			return int64(v), nil
		}
	case *ServerError:
		return v, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			n, err := NormalizeReply(e, serverError)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	}
	if msg, ok := serverError(v); ok {
		return &ServerError{Message: msg}, nil
	}
	return nil, fmt.Errorf("%w: reply of type %T", dsync.ErrUnexpectedReply, v)
}

// TransportError wraps err, the failure of a round trip, with prefix (the
// adapter's name and the operation), so that it matches ctx.Err() when
// the context is what ended the call: clients turn a deadline into a
// socket deadline, whose i/o timeout can fire just before the context's
// own timer. The result wraps err too.
func TransportError(ctx context.Context, prefix string, err error) error {
	cerr := ctx.Err()
	if dl, ok := ctx.Deadline(); cerr == nil && ok && !time.Now().Before(dl) {
		cerr = context.DeadlineExceeded
	}
	if cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%s: %w (%w)", prefix, cerr, err)
	}
	return fmt.Errorf("%s: %w", prefix, err)
}

// CallTimeout returns the bound of a call whose context can never be
// cancelled (rule 7): d, the adapter's own timeout, or less if ctx has a
// deadline, which such a context may have; never less than a millisecond.
func CallTimeout(ctx context.Context, d time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, max(time.Until(dl), time.Millisecond))
	}
	return d
}
