package backend

import (
	"errors"
	"net"
	"strconv"
	"strings"
)

// Slot returns the Redis Cluster hash slot of key (0 to 16383): the
// CRC-16/XMODEM of its hash tag (the part between the first "{" and the
// next "}", if not empty) or of the whole key, modulo 16384. It is for
// adapters whose client does not say which node serves a key (see
// SlotMaster).
func Slot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			key = key[open+1 : open+1+n]
		}
	}
	var crc uint16
	for i := range len(key) {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			carry := crc >> 15 // the polynomial applies when the top bit shifts out
			crc = crc<<1 ^ 0x1021*carry
		}
	}
	return int(crc % 16384)
}

// SlotTable says which master serves each hash slot of a cluster, as a
// CLUSTER SLOTS reply told at one moment. It is for SlotMaster drivers
// whose client does not expose its own table.
type SlotTable struct {
	ranges []slotRange
}

type slotRange struct {
	first, last int
	addr        string
}

// NewSlotTable reads the normalized reply of CLUSTER SLOTS (see
// NormalizeReply): an array of [first slot, last slot, [host, port, ...],
// replicas...]. Masters are named host:port.
func NewSlotTable(reply any) (*SlotTable, error) {
	entries, err := Array(reply, 0)
	if err != nil {
		return nil, err
	}
	t := &SlotTable{}
	for _, e := range entries {
		f, err := Array(e, 3)
		if err != nil {
			return nil, err
		}
		master, err := Array(f[2], 2)
		if err != nil {
			return nil, err
		}
		first, err1 := Int(f[0])
		last, err2 := Int(f[1])
		host, err3 := String(master[0])
		port, err4 := Int(master[1])
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return nil, err
		}
		t.ranges = append(t.ranges, slotRange{int(first), int(last), net.JoinHostPort(host, strconv.FormatInt(port, 10))})
	}
	return t, nil
}

// Master returns the address of the master serving key's slot, and false
// if the table has none.
func (t *SlotTable) Master(key string) (string, bool) {
	slot := Slot(key)
	for _, r := range t.ranges {
		if r.first <= slot && slot <= r.last {
			return r.addr, true
		}
	}
	return "", false
}
