module github.com/dsyncgo/dsync

go 1.25.0

require (
	github.com/gomodule/redigo v1.9.3
	go.uber.org/goleak v1.3.0
)

require github.com/stretchr/testify v1.12.1 // indirect
