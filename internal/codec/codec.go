// Package codec is the Go half of the formats that dsync's scripts and
// its Go code share: the argument header every script for an owner takes,
// the exclusive hold's plain value, the waiter entry, the grant a wake-up
// carries, and the replies of attempts and of scripts that hand a
// primitive on. Its Lua half is internal/script/codec.lua, which documents
// each format; a change to one touches these two files.
package codec

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dsyncgo/dsync"
	"github.com/dsyncgo/dsync/backend"
	"github.com/dsyncgo/dsync/internal/ids"
)

// The positions in the argument header (ARGV[i+1] in Lua).
const (
	Owner      = iota // owner id
	Op                // operation id
	HoldID            // id of the hold a release names; "" in an attempt
	Plain             // the hold's plain value (see PlainValue)
	Lease             // ms: asked by an attempt, restored by a partial release
	Channel           // the primitive's wake channel base
	Hub               // the caller's hub id
	Entry             // waiter entry, "" for none
	EntryTTL          // ms the waiter entry lives without an attempt
	Registered        // "1" if an earlier attempt registered the waiter
	FenceTTL          // ms the fence key, the last of KEYS, keeps the last token; "0" for none
	HeaderLen         // the first of the primitive's own arguments
)

// Header is the argument header in Go: what a script for an owner takes
// first, ARGV[1] to ARGV[HeaderLen] (see header in codec.lua, which
// documents each field). Every call of such a script builds its arguments
// with Append, so that the order lives here only.
//
// Each field is an argument as backend.Backend.Eval takes it: a string, an
// integer, or a value boxed once and kept by its caller (a string put in
// an interface once, for calls that repeat it, costs none of them an
// allocation). A nil field is sent as its format's empty value: "" for an
// id, value, channel or entry, "0" for a number of milliseconds.
type Header struct {
	Owner      any  // owner id
	Op         any  // operation id
	HoldID     any  // id of the hold a release names
	Plain      any  // the hold's plain value (see PlainValue)
	Lease      any  // ms: asked by an attempt, restored by a partial release
	Channel    any  // the primitive's wake channel base
	Hub        any  // the caller's hub id
	Entry      any  // waiter entry
	EntryTTL   any  // ms the waiter entry lives without an attempt
	Registered bool // an earlier attempt may have registered the waiter
	FenceTTL   any  // ms the fence key keeps the last token; nil: no fence key
}

// Append appends the header's HeaderLen arguments to buf, in order.
func (h *Header) Append(buf []any) []any {
	registered := any("0")
	if h.Registered {
		registered = "1"
	}
	return append(buf, or(h.Owner, ""), or(h.Op, ""), or(h.HoldID, ""), or(h.Plain, ""), or(h.Lease, "0"),
		or(h.Channel, ""), or(h.Hub, ""), or(h.Entry, ""), or(h.EntryTTL, "0"), registered, or(h.FenceTTL, "0"))
}

// or returns v, or empty if v is nil.
func or(v, empty any) any {
	if v == nil {
		return empty
	}
	return v
}

// PlainValue returns what a plain acquisition (one SET NX) stores at a
// primitive's main key for the hold id of owner in role: the plain form
// of the exclusive state; for role "r", the read-write lock's read hold,
// its own (see rwlock/lua/rw.lua); with fields, those of a primitive that
// counts what it holds (the semaphore's permits and capacity).
func PlainValue(owner, id, role string, fields ...int64) string {
	return plainValue(owner, id, role, "", fields)
}

// TermTail returns the tail of an election term's plain value, which
// carries the candidate's value: what a campaign passes to NewHold.
func TermTail(value string) string { return "=" + value }

// TermValue returns the plain value of an election term, the plain form
// of the exclusive state for a term taken by a plain campaign: the owner
// and the hold id, then the lease and the fence ttl of the election in
// ms, and the candidate's value (see codec.lua).
func TermValue(owner, id string, lease, fenceTTL int64, value string) string {
	return plainValue(owner, id, "x", TermTail(value), []int64{lease, fenceTTL})
}

func plainValue(owner, id, role, tail string, fields []int64) string {
	var b strings.Builder
	b.Grow(plainLen(len(owner), len(id), role, tail, fields))
	b.WriteString(owner)
	b.WriteByte(' ')
	b.WriteString(id)
	writePlainRest(&b, role, tail, fields)
	return b.String()
}

// NewHold returns the ids of a fresh acquisition in role and its hold's
// plain value, PlainValue(owner, op, role, fields...) followed by tail if
// it is not empty (an election term's, see TermTail): owner is the one
// given, or a fresh owner id if it is "" (an ownerless hold), and op a
// fresh operation id, each made as dsync.NewID makes ids (128 random bits,
// 32 hex digits). The three are parts of one string, made with one
// allocation, on the path of every acquisition.
func NewHold(owner, role, tail string, fields ...int64) (ownerID, op, plain string) {
	var random [32]byte
	var digits [64]byte
	fresh := owner == ""
	n := 16
	if fresh {
		n = 32
	}
	ids.Read(random[:n])
	hex.Encode(digits[:], random[:n])
	ownerLen := len(owner)
	if fresh {
		ownerLen = 32
	}
	var b strings.Builder
	b.Grow(plainLen(ownerLen, 32, role, tail, fields))
	id := digits[:32]
	if fresh {
		b.Write(digits[:32])
		id = digits[32:]
	} else {
		b.WriteString(owner)
	}
	b.WriteByte(' ')
	b.Write(id)
	writePlainRest(&b, role, tail, fields)
	plain = b.String()
	return plain[:ownerLen], plain[ownerLen+1 : ownerLen+33], plain
}

// plainLen bounds the length of a plain value.
func plainLen(owner, id int, role, tail string, fields []int64) int {
	n := owner + 1 + id + len(" r") + 1 + len(tail)
	for range fields {
		n += len(" -9223372036854775808")
	}
	return n
}

// writePlainRest writes what follows the hold id in a plain value.
func writePlainRest(b *strings.Builder, role, tail string, fields []int64) {
	if role == "r" {
		b.WriteString(" r")
	}
	var digits [20]byte
	for _, f := range fields {
		b.WriteByte(' ')
		b.Write(strconv.AppendInt(digits[:0], f, 10))
	}
	if tail != "" {
		b.WriteByte(' ')
		b.WriteString(tail)
	}
}

// EntryOf returns the waiter entry of the waiter at address (see package
// hub) for owner, asking for fields (say, the lease of a hold handed to
// it, in ms, and before it a semaphore's permits).
func EntryOf(address, owner string, fields ...int64) string {
	var b strings.Builder
	b.Grow(len(address) + len(owner) + 24*len(fields) + 2)
	b.WriteString(address)
	for _, f := range fields {
		b.WriteByte('|')
		b.WriteString(strconv.FormatInt(f, 10))
	}
	b.WriteByte('|')
	b.WriteString(owner)
	return b.String()
}

// EntryAddress returns the address a waiter entry starts with.
func EntryAddress(entry string) string {
	if i := strings.IndexByte(entry, '|'); i >= 0 {
		return entry[:i]
	}
	return entry
}

// Wake splits the payload of a wake-up message, "<waiter id>" or
// "<waiter id> <grant>", into the waiter id and the grant ("" for none).
func Wake(payload string) (id, grant string) {
	id, grant, _ = strings.Cut(payload, " ")
	return id, grant
}

// GrantToken returns the fencing token a grant starts with.
func GrantToken(grant string) (int64, bool) {
	word, _, _ := strings.Cut(grant, " ")
	t, err := strconv.ParseInt(word, 10, 64)
	return t, err == nil && t > 0
}

// Attempt is what the reply of an attempt says.
type Attempt struct {
	Acquired bool

	// Of an acquisition: the owner's hold count, the hold's token (0 if
	// not drawn yet), its id and how long it has left on the server.
	Count int64
	Token int64
	ID    string
	TTL   time.Duration

	// Plain says the reply was 0: the script took a plain hold on a
	// primitive it found free, nobody registered and nothing else held,
	// as a plain SET NX would have (see LockSpec.Plain in internal/core).
	Plain bool

	// Of a failure: how long the current hold lasts (negative if
	// unknown), and the current or last token (0 if none is known).
	RetryIn time.Duration
	Seen    int64
}

// AttemptReply decodes the reply of an attempt made for operation op,
// asking for a lease of ttl (see codec.lua, "The replies"): 0, a plain
// hold; a positive token, a new hold; or an array.
func AttemptReply(reply any, op string, ttl time.Duration) (Attempt, error) {
	if token, ok := reply.(int64); ok {
		if token < 0 {
			return Attempt{}, fmt.Errorf("%w: acquire reply %v", dsync.ErrUnexpectedReply, reply)
		}
		return Attempt{Acquired: true, Count: 1, Token: token, ID: op, TTL: ttl, Plain: token == 0}, nil
	}
	r, err := backend.Array(reply, 3)
	if err != nil {
		return Attempt{}, err
	}
	ok, err1 := backend.Int(r[0])
	n, err2 := backend.Int(r[1])
	token, err3 := backend.Int(r[2])
	if err := errors.Join(err1, err2, err3); err != nil {
		return Attempt{}, err
	}
	if ok == 0 {
		retry := time.Duration(-1)
		if n >= 0 {
			retry = time.Duration(n) * time.Millisecond
		}
		return Attempt{RetryIn: retry, Seen: token}, nil
	}
	if len(r) < 5 || n < 1 || token < 0 {
		return Attempt{}, fmt.Errorf("%w: acquire reply %v", dsync.ErrUnexpectedReply, reply)
	}
	id, err1 := backend.String(r[3])
	left, err2 := backend.Int(r[4])
	if err := errors.Join(err1, err2); err != nil {
		return Attempt{}, err
	}
	return Attempt{Acquired: true, Count: n, Token: token, ID: id, TTL: time.Duration(left) * time.Millisecond}, nil
}

// Handed is one waiter that a script handed a primitive to, or woke to
// try (Grant "").
type Handed struct {
	Address, Grant, Owner string
}

// HandOffReply decodes the reply of a script that may hand a primitive to
// waiters: a bare integer n, or {n, hold id, address, grant, owner, ...}.
// It appends the waiters named to handed and returns n, the hold id and
// handed.
func HandOffReply(reply any, handed []Handed) (n int64, id string, _ []Handed, err error) {
	if n, ok := reply.(int64); ok {
		return n, "", handed, nil
	}
	r, err := backend.Array(reply, 2)
	if err == nil && (len(r)-2)%3 != 0 {
		err = fmt.Errorf("%w: hand-off reply %v", dsync.ErrUnexpectedReply, reply)
	}
	if err != nil {
		return 0, "", handed, err
	}
	n, err1 := backend.Int(r[0])
	id, err2 := backend.String(r[1])
	if err := errors.Join(err1, err2); err != nil {
		return 0, "", handed, err
	}
	for i := 2; i < len(r); i += 3 {
		address, err1 := backend.String(r[i])
		grant, err2 := backend.String(r[i+1])
		owner, err3 := backend.String(r[i+2])
		if err := errors.Join(err1, err2, err3); err != nil {
			return 0, "", handed, err
		}
		handed = append(handed, Handed{Address: address, Grant: grant, Owner: owner})
	}
	return n, id, handed, nil
}
