package leasetest_test

import (
	"testing"

	"github.com/objlease/objlease/objlease/leasetest"
	"github.com/objlease/objlease/providers/mem"
)

func TestMem(t *testing.T) { leasetest.Run(t, leasetest.Config{Store: mem.New(), Prefix: "leases/"}) }
