module github.com/dsyncgo/dsync/backend/rueidis

go 1.25.0

require (
	github.com/dsyncgo/dsync v0.0.0
	github.com/gomodule/redigo v1.9.3
	github.com/redis/rueidis v1.0.79
	go.uber.org/goleak v1.3.0
)

require golang.org/x/sys v0.47.0 // indirect

// Until dsync is tagged, the adapter builds against the checkout it lives
// in.
replace github.com/dsyncgo/dsync => ../..
