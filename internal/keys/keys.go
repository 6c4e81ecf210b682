// Package keys names the Redis keys and channels of a primitive.
//
// Every key of one primitive instance shares one Redis Cluster hash tag,
// the escaped name in braces, so that a script touching several of them
// stays within one slot:
//
//	<prefix>:<kind>:{<name>}            the primitive's main key
//	<prefix>:<kind>:{<name>}:<suffix>   its companions
//
// Braces and percent signs in the name are percent-encoded, so a name can
// hold any bytes and still produce one hash tag.
package keys

import (
	"fmt"
	"strings"

	"github.com/dsyncgo/dsync"
)

const (
	// DefaultPrefix starts every key unless a primitive is given another.
	DefaultPrefix = "dsync"
	// MaxNameLen is the longest name accepted, in bytes.
	MaxNameLen = 1024
	// MaxPrefixLen is the longest prefix accepted, in bytes.
	MaxPrefixLen = 256
)

var escaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// Base returns the main key of a primitive of the given kind ("mutex",
// "rwlock", ...), or an error matching dsync.ErrInvalidName.
func Base(prefix, kind, name string) (string, error) {
	switch {
	case name == "":
		return "", fmt.Errorf("%w: empty name", dsync.ErrInvalidName)
	case len(name) > MaxNameLen:
		return "", fmt.Errorf("%w: name of %d bytes, the limit is %d", dsync.ErrInvalidName, len(name), MaxNameLen)
	case prefix == "":
		return "", fmt.Errorf("%w: empty key prefix", dsync.ErrInvalidName)
	case len(prefix) > MaxPrefixLen:
		return "", fmt.Errorf("%w: key prefix of %d bytes, the limit is %d", dsync.ErrInvalidName, len(prefix), MaxPrefixLen)
	case strings.ContainsAny(prefix, "{}"):
		return "", fmt.Errorf("%w: key prefix %q contains a brace", dsync.ErrInvalidName, prefix)
	}
	return prefix + ":" + kind + ":{" + escaper.Replace(name) + "}", nil
}

// HashTag returns the part of key that Redis Cluster hashes: the content
// of the first {...} if it is not empty, else the whole key.
func HashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return key
	}
	return key[open+1 : open+1+end]
}

// Slot returns the Redis Cluster hash slot of key.
func Slot(key string) uint16 {
	return crc16(HashTag(key)) % 16384
}

// crc16 is CRC-16/XMODEM, the checksum Redis Cluster uses for slots.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for j := 0; j < 8; j++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
