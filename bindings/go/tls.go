package redlock

// #include <stdlib.h>
// #include "redlock.h"
import "C"

import (
	"strings"
)

// TLS: options for the manager's rediss:// nodes. A node URL "rediss://host:port" is reached
// over TLS, through the same non-blocking connections, poll loop and per-step deadline as a
// plain one; the TLS handshake is part of connecting (a node whose handshake hangs costs a
// step its connect timeout at most, and nothing while a quorum answers). Plain redis:// nodes
// ignore these options, so a cluster may mix both.
//
// Every file is read by New: one that is missing, unreadable or not the PEM it should be is
// ErrInvalidArgument, whose message names its path (never its content). A node whose
// certificate is refused (another CA, expired, another name), or that refuses this client,
// is reported per node as NodeTLS, and the error's message says why, naming the node.

// WithTLSCAFile trusts the CA certificates of the PEM file at path (one or more CERTIFICATE
// sections) for the rediss:// nodes, instead of the system's trust store (the default). New
// reads it: a missing or unreadable file, or one with no usable certificate, is
// ErrInvalidArgument naming the path.
func WithTLSCAFile(path string) Option {
	return func(o *options) {
		if err := checkPath("CA file", path); err != nil {
			o.fail(err)
			return
		}
		o.set[setTLSCAFile] = func(cfg *C.redlock_config, e *C.char) C.enum_redlock_status {
			return withCString(path, func(p *C.char) C.enum_redlock_status {
				return C.redlock_config_set_tls_ca_file(cfg, p, e, errBufLen)
			})
		}
	}
}

// WithTLSClientCert presents a client certificate to the rediss:// nodes that ask for one
// (mutual TLS: a node with tls-auth-clients yes). certFile holds the certificate (then any
// intermediates), keyFile its private key (PKCS#8, PKCS#1 or SEC1), both PEM. New reads them:
// a missing or unreadable file, one without the expected PEM section, or a key that does not
// belong to the certificate is ErrInvalidArgument naming the path (never the key). The
// default is no client certificate.
func WithTLSClientCert(certFile, keyFile string) Option {
	return func(o *options) {
		for _, p := range [][2]string{{"client certificate", certFile}, {"client key", keyFile}} {
			if err := checkPath(p[0], p[1]); err != nil {
				o.fail(err)
				return
			}
		}
		o.set[setTLSClientCert] = func(cfg *C.redlock_config, e *C.char) C.enum_redlock_status {
			return withCString(certFile, func(cc *C.char) C.enum_redlock_status {
				return withCString(keyFile, func(ck *C.char) C.enum_redlock_status {
					return C.redlock_config_set_tls_client_cert(cfg, cc, ck, e, errBufLen)
				})
			})
		}
	}
}

// WithTLSServerName sets the name every rediss:// node's certificate must carry, and that is
// sent in the handshake (SNI), instead of the host of each node's URL: for nodes addressed by
// IP whose certificates name a host. name is a DNS name or an IP address; New returns
// ErrInvalidArgument for anything else. The default is each node's host.
func WithTLSServerName(name string) Option {
	return func(o *options) {
		if name == "" || strings.IndexByte(name, 0) >= 0 {
			o.fail(invalidf("TLS server name must be a DNS name or an IP address, got %q", name))
			return
		}
		o.set[setTLSServerName] = func(cfg *C.redlock_config, e *C.char) C.enum_redlock_status {
			return withCString(name, func(n *C.char) C.enum_redlock_status {
				return C.redlock_config_set_tls_server_name(cfg, n, e, errBufLen)
			})
		}
	}
}

// WithTLSInsecureSkipVerify turns certificate verification off for the rediss:// nodes. It
// is insecure, for tests only: any certificate from any node is accepted (no check of who
// signed it, when it expires or what it names), so anyone on the path can read and change
// every command, and grant locks; the traffic is still encrypted. New writes a warning to
// stderr when it is on.
func WithTLSInsecureSkipVerify() Option {
	return func(o *options) {
		o.set[setTLSInsecureSkipVerify] = func(cfg *C.redlock_config, e *C.char) C.enum_redlock_status {
			return C.redlock_config_set_tls_insecure_skip_verify(cfg, true, e, errBufLen)
		}
	}
}

// checkPath refuses what C could not receive: an empty path, or one with a NUL byte.
func checkPath(what, path string) error {
	if path == "" {
		return invalidf("TLS %s path is empty", what)
	}
	if strings.IndexByte(path, 0) >= 0 {
		return invalidf("TLS %s path contains a NUL byte", what)
	}
	return nil
}
