// Command coredns is CoreDNS at COREDNS_VERSION with only the plugins the real node's pods need
// (hack/build-go-tools.sh coredns): cluster names from the API server (kubernetes), fixed answers
// (hosts, template), and no forward plugin, so that a name outside the cluster gets NXDOMAIN and
// no query ever leaves this machine.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/template"
)

// directives keeps upstream's plugin.cfg order (a plugin's place in the chain), restricted to the
// plugins imported above.
var directives = []string{"ready", "health", "errors", "log", "cache", "template", "hosts", "kubernetes"}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
