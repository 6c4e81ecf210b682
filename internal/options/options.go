// Package options holds the settings every primitive shares, so that each
// package's WithLease, WithWatchdog, WithPrefix and WithLogger mean the
// same thing and are validated the same way.
package options

import (
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/keys"
)

// DefaultWatchdogLease is the lease renewed by the watchdog unless a
// primitive is given another.
const DefaultWatchdogLease = 30 * time.Second

// Common are the shared settings. Errors in them are kept and reported by
// the primitive's first call, before any I/O.
type Common struct {
	Prefix   string
	Lease    time.Duration
	Watchdog bool // renew the lease while held
	Logger   *slog.Logger
	Err      error
}

// Defaults returns the documented defaults: prefix "dsync", a 30s lease
// renewed by the watchdog, slog.Default for background events.
func Defaults() Common {
	return Common{
		Prefix:   keys.DefaultPrefix,
		Lease:    DefaultWatchdogLease,
		Watchdog: true,
		Logger:   slog.Default(),
	}
}

func (c *Common) setLease(d time.Duration, watchdog bool) {
	if d < time.Millisecond {
		c.fail(fmt.Errorf("%w: %v (the minimum is 1ms)", dsync.ErrInvalidLease, d))
		return
	}
	c.Lease, c.Watchdog = d, watchdog
}

// SetLease makes the lease fixed: d, not renewed.
func (c *Common) SetLease(d time.Duration) { c.setLease(d, false) }

// SetWatchdog makes the lease d, renewed every d/3 while held.
func (c *Common) SetWatchdog(d time.Duration) { c.setLease(d, true) }

// SetLogger sets the logger; nil discards background events.
func (c *Common) SetLogger(l *slog.Logger) {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	c.Logger = l
}

func (c *Common) fail(err error) {
	if c.Err == nil {
		c.Err = err
	}
}

// CheckBackend reports a nil backend, or one that cannot be a map key.
func CheckBackend(b backend.Backend) error {
	if b == nil {
		return fmt.Errorf("%w: nil", dsync.ErrInvalidBackend)
	}
	v := reflect.ValueOf(b)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.Interface, reflect.Slice:
		if v.IsNil() {
			return fmt.Errorf("%w: nil %T", dsync.ErrInvalidBackend, b)
		}
	}
	if !v.Type().Comparable() {
		return fmt.Errorf("%w: %T is not comparable; use a pointer", dsync.ErrInvalidBackend, b)
	}
	return nil
}
