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
	"github.com/dsyncgo/dsync/observe"
)

const (
	// DefaultWatchdogLease is the lease renewed by the watchdog unless a
	// primitive is given another.
	DefaultWatchdogLease = 30 * time.Second

	// DefaultFenceTTL is how long a primitive keeps its last fencing
	// token after the last acquisition unless given another.
	DefaultFenceTTL = time.Hour
)

// Common are the shared settings. Errors in them are kept and reported by
// the primitive's first call, before any I/O.
type Common struct {
	Prefix   string
	Lease    time.Duration
	Watchdog bool // renew the lease while held
	Logger   *slog.Logger
	Err      error

	// FenceTTL is how long the last fencing token is kept after the
	// last acquisition.
	FenceTTL time.Duration

	// WaiterTimeout is how long a waiter's place in a queue outlives its
	// last heartbeat; 0 means the primitive's default.
	WaiterTimeout time.Duration

	// ExpiryMargin is how long before a hold's expiry on the server its
	// holder is told it ended; negative means the default (see
	// lease.DefaultMargin).
	ExpiryMargin time.Duration

	// Observer, if set, hears of this handle's acquisitions, holds and
	// waiters instead of its backend's observer (see package observe).
	Observer *observe.Observer

	// HandoffAfter is how long the waiter at the head of a mutex's queue
	// may wait before releases hand the mutex to it rather than free it
	// for whoever asks first (see package mutex); negative means the
	// default.
	HandoffAfter time.Duration
}

// Defaults returns the documented defaults: prefix "dsync", a 30s lease
// renewed by the watchdog, slog.Default for background events, the last
// fencing token kept for an hour, the default expiry margin.
func Defaults() Common {
	return Common{
		Prefix:   keys.DefaultPrefix,
		Lease:    DefaultWatchdogLease,
		Watchdog: true,
		Logger:   slog.Default(),
		FenceTTL: DefaultFenceTTL,

		ExpiryMargin: -1,
		HandoffAfter: -1,
	}
}

// SetHandoffAfter sets how long a mutex's head waiter may wait before
// releases hand the mutex to it.
func (c *Common) SetHandoffAfter(d time.Duration) {
	if d < 0 {
		c.fail(fmt.Errorf("%w: hand-off threshold %v (it must not be negative)", dsync.ErrInvalidLease, d))
		return
	}
	c.HandoffAfter = d.Truncate(time.Millisecond)
}

// SetExpiryMargin sets how long before a hold's expiry on the server its
// holder is told it ended.
func (c *Common) SetExpiryMargin(d time.Duration) {
	if d < 0 {
		c.fail(fmt.Errorf("%w: expiry margin %v (it must not be negative)", dsync.ErrInvalidLease, d))
		return
	}
	c.ExpiryMargin = d
}

// Check reports settings that are invalid together: an expiry margin of
// half the lease or more, which would leave the holder less time than it
// gives up.
func (c *Common) Check() error {
	if c.Err != nil {
		return c.Err
	}
	if c.ExpiryMargin >= 0 && 2*c.ExpiryMargin >= c.Lease {
		return fmt.Errorf("%w: expiry margin %v is half the lease %v or more", dsync.ErrInvalidLease, c.ExpiryMargin, c.Lease)
	}
	return nil
}

// setLease sets the lease, in whole milliseconds as the server keeps it:
// a client that counted the fraction would outlive the server's expiry.
func (c *Common) setLease(d time.Duration, watchdog bool) {
	if d < time.Millisecond {
		c.fail(fmt.Errorf("%w: %v (the minimum is 1ms)", dsync.ErrInvalidLease, d))
		return
	}
	c.Lease, c.Watchdog = d.Truncate(time.Millisecond), watchdog
}

// SetLease makes the lease fixed: d, not renewed.
func (c *Common) SetLease(d time.Duration) { c.setLease(d, false) }

// SetWatchdog makes the lease d, renewed every d/3 while held.
func (c *Common) SetWatchdog(d time.Duration) { c.setLease(d, true) }

// SetFenceTTL sets how long the last fencing token is kept.
func (c *Common) SetFenceTTL(d time.Duration) {
	if d < time.Second {
		c.fail(fmt.Errorf("%w: fence ttl %v (the minimum is 1s)", dsync.ErrInvalidLease, d))
		return
	}
	c.FenceTTL = d
}

// MinWaiterTimeout is the shortest waiter timeout accepted.
const MinWaiterTimeout = 10 * time.Millisecond

// SetWaiterTimeout sets the waiter timeout: the lease of a waiter's place
// in a queue, renewed by its heartbeat.
func (c *Common) SetWaiterTimeout(d time.Duration) {
	if d < MinWaiterTimeout {
		c.fail(fmt.Errorf("%w: waiter timeout %v (the minimum is %v)", dsync.ErrInvalidLease, d, MinWaiterTimeout))
		return
	}
	c.WaiterTimeout = d.Truncate(time.Millisecond)
}

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
