module github.com/dsyncgo/dsync

go 1.26.0

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/gomodule/redigo v1.9.3
	go.uber.org/goleak v1.3.0
)

require (
	github.com/stretchr/testify v1.12.1 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
)
