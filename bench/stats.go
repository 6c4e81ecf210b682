package bench

import (
	"slices"
	"time"
)

func sorted(ds []time.Duration) []time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds
}

// percentile of sorted durations or figures, nearest rank; 0 for none.
func percentile[T time.Duration | float64](ds []T, p float64) T {
	if len(ds) == 0 {
		return 0
	}
	i := int(p*float64(len(ds))+0.5) - 1
	return ds[max(0, min(i, len(ds)-1))]
}
