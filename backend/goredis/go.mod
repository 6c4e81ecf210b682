module github.com/dsyncgo/dsync/backend/goredis

go 1.26.0

require (
	github.com/dsyncgo/dsync v0.0.0
	github.com/gomodule/redigo v1.9.3
	github.com/redis/go-redis/v9 v9.23.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

// Until dsync is tagged, the adapter builds against the checkout it lives
// in.
replace github.com/dsyncgo/dsync => ../..
