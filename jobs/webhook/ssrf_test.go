package webhook_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"sheetq/jobs/webhook"
)

// v6form builds the IPv6 address that carries an IPv4 address in one embedding.
type v6form struct {
	name string
	// wholesale forms are refused whatever they carry: nothing public needs them.
	wholesale bool
	make      func(v4 [4]byte) netip.Addr
}

func from16(f func(b *[16]byte)) netip.Addr {
	var b [16]byte
	f(&b)
	return netip.AddrFrom16(b)
}

var (
	publicV4  = [4]byte{8, 8, 4, 4}
	isatapNet = [8]byte{0x20, 0x01, 0x48, 0x60, 0, 1, 0, 0} // a public /64 (not Teredo)
)

// v6forms are the embeddings of an IPv4 address in an IPv6 one that webhooks know.
var v6forms = []v6form{
	{"IPv4-mapped ::ffff:0:0/96", false, func(v [4]byte) netip.Addr {
		return from16(func(b *[16]byte) { b[10], b[11] = 0xff, 0xff; copy(b[12:], v[:]) })
	}},
	{"IPv4-translated ::ffff:0:0:0/96", false, func(v [4]byte) netip.Addr {
		return from16(func(b *[16]byte) { b[8], b[9] = 0xff, 0xff; copy(b[12:], v[:]) })
	}},
	{"IPv4-compatible ::/96", true, func(v [4]byte) netip.Addr {
		return from16(func(b *[16]byte) { copy(b[12:], v[:]) })
	}},
	{"NAT64 64:ff9b::/96", false, func(v [4]byte) netip.Addr {
		return from16(func(b *[16]byte) { b[1], b[2], b[3] = 0x64, 0xff, 0x9b; copy(b[12:], v[:]) })
	}},
	{"local-use NAT64 64:ff9b:1::/48", true, func(v [4]byte) netip.Addr {
		// RFC 6052's /48 layout: 16 bits of the address, the u octet, the other 16.
		return from16(func(b *[16]byte) {
			b[1], b[2], b[3], b[5] = 0x64, 0xff, 0x9b, 1
			copy(b[6:8], v[:2])
			copy(b[9:11], v[2:])
		})
	}},
	{"6to4 2002::/16", false, func(v [4]byte) netip.Addr {
		return from16(func(b *[16]byte) { b[0], b[1] = 0x20, 0x02; copy(b[2:6], v[:]); b[15] = 1 })
	}},
	{"Teredo client", false, func(v [4]byte) netip.Addr {
		return from16(func(b *[16]byte) {
			b[0], b[1] = 0x20, 0x01
			copy(b[4:8], publicV4[:])
			b[8], b[10], b[11] = 0x80, 0xff, 0xff
			for i := range 4 {
				b[12+i] = ^v[i]
			}
		})
	}},
	{"Teredo server", false, func(v [4]byte) netip.Addr {
		return from16(func(b *[16]byte) {
			b[0], b[1] = 0x20, 0x01
			copy(b[4:8], v[:])
			b[8], b[10], b[11] = 0x80, 0xff, 0xff
			for i := range 4 {
				b[12+i] = ^publicV4[i]
			}
		})
	}},
	{"ISATAP 0:5efe", false, func(v [4]byte) netip.Addr {
		return from16(func(b *[16]byte) { copy(b[:8], isatapNet[:]); b[10], b[11] = 0x5e, 0xfe; copy(b[12:], v[:]) })
	}},
	{"ISATAP 200:5efe", false, func(v [4]byte) netip.Addr {
		return from16(func(b *[16]byte) {
			copy(b[:8], isatapNet[:])
			b[8], b[10], b[11] = 0x02, 0x5e, 0xfe
			copy(b[12:], v[:])
		})
	}},
	{"NAT64 with a zone", false, func(v [4]byte) netip.Addr {
		return from16(func(b *[16]byte) { b[1], b[2], b[3] = 0x64, 0xff, 0x9b; copy(b[12:], v[:]) }).WithZone("eth0")
	}},
}

// embedded are IPv4 addresses to carry, and whether they are refused on their own.
var embedded = []struct {
	v4      string
	blocked bool
}{
	{"127.0.0.1", true},       // loopback
	{"127.1.2.3", true},       // loopback
	{"10.1.2.3", true},        // private
	{"172.16.0.1", true},      // private
	{"192.168.1.1", true},     // private
	{"169.254.1.1", true},     // link-local
	{"169.254.169.254", true}, // cloud metadata
	{"0.0.0.0", true},         // unspecified
	{"100.64.0.1", true},      // carrier-grade NAT
	{"255.255.255.255", true}, // broadcast
	{"224.0.0.1", true},       // multicast
	{"8.8.8.8", false},        // public
	{"93.184.216.34", false},  // public
	{"172.32.0.1", false},     // just outside 172.16/12
}

// Every IPv6 form that embeds an IPv4 address is refused when that address is, at
// acceptance (CheckURL on the literal) and at dial time (the dialer's Control hook on the
// raw address); a public embedded address stays allowed, except in the forms refused
// wholesale.
func TestEmbeddedIPv4Forms(t *testing.T) {
	ctx := context.Background()
	for _, form := range v6forms {
		for _, e := range embedded {
			v4 := netip.MustParseAddr(e.v4)
			ip := form.make(v4.As4())
			want := e.blocked || form.wholesale
			if got := webhook.Blocked(ip); got != want {
				t.Errorf("%s of %s: Blocked(%s) = %v, want %v", form.name, v4, ip, got, want)
			}
			literal := strings.ReplaceAll(ip.String(), "%", "%25") // a zone in a URL
			err := webhook.CheckURL(ctx, "http://["+literal+"]:8080/hook", false, nil)
			if want && !errors.Is(err, webhook.ErrNotAllowed) || !want && err != nil {
				t.Errorf("%s of %s: CheckURL(%s) = %v, want refused %v", form.name, v4, literal, err, want)
			}
			err = webhook.DialControl("tcp6", netip.AddrPortFrom(ip, 443).String(), nil)
			if want && !errors.Is(err, webhook.ErrNotAllowed) || !want && err != nil {
				t.Errorf("%s of %s: dial control(%s) = %v, want refused %v", form.name, v4, ip, err, want)
			}
		}
	}
	// The address the issue was found with, as written.
	if err := webhook.CheckURL(ctx, "http://[::ffff:0:127.0.0.1]/", false, nil); !errors.Is(err, webhook.ErrNotAllowed) {
		t.Errorf("http://[::ffff:0:127.0.0.1]/ = %v, want refused", err)
	}
	if err := webhook.CheckURL(ctx, "http://[::ffff:0:127.0.0.1]/", true, nil); err != nil {
		t.Errorf("with private addresses allowed: %v", err)
	}
}
