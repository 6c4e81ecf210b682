package backend

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dsyncgo/dsync"
)

// ServerError is an error reply from the server, such as
// "NOSCRIPT No matching script" or an error raised by a script.
//
// Message is the reply's text as the client library reports it, without
// the leading "-". It need not be the server's exact text, but it must
// keep the error code, the first word, wherever it is not the generic
// "ERR": dsync recognizes NOSCRIPT by Prefix, and scripts raise errors of
// their own codes, which the suite checks to the letter. A client that
// strips "ERR " (rueidis does) may pass its text on as it is.
type ServerError struct {
	Message string
}

func (e *ServerError) Error() string { return e.Message }

// Prefix returns the error's first word, such as "NOSCRIPT" or "ERR".
func (e *ServerError) Prefix() string {
	prefix, _, _ := strings.Cut(e.Message, " ")
	return prefix
}

// IsNoScript reports whether err is a NOSCRIPT error reply, the signal for an
// adapter to fall back from EVALSHA to EVAL.
func IsNoScript(err error) bool {
	e, ok := err.(*ServerError)
	if !ok {
		return false
	}
	return e.Prefix() == "NOSCRIPT"
}

// The helpers below decode normalized replies for the primitives: a reply of
// an unexpected shape becomes an error matching dsync.ErrUnexpectedReply,
// never a panic.

func unexpected(want string, v any) error {
	return fmt.Errorf("%w: want %s, got %T %v", dsync.ErrUnexpectedReply, want, v, v)
}

// Int returns v as an int64. Integer replies and strings holding a decimal
// integer are accepted.
func Int(v any) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, unexpected("integer", v)
		}
		return n, nil
	}
	return 0, unexpected("integer", v)
}

// String returns v as a string. Nil is not accepted.
func String(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", unexpected("string", v)
	}
	return s, nil
}

// Array returns v as an array of at least min elements.
func Array(v any, min int) ([]any, error) {
	a, ok := v.([]any)
	if !ok || len(a) < min {
		return nil, unexpected(fmt.Sprintf("array of %d or more", min), v)
	}
	return a, nil
}

// Ints returns v as an array of at least min integers.
func Ints(v any, min int) ([]int64, error) {
	a, err := Array(v, min)
	if err != nil {
		return nil, err
	}
	ns := make([]int64, len(a))
	for i, e := range a {
		if ns[i], err = Int(e); err != nil {
			return nil, err
		}
	}
	return ns, nil
}
