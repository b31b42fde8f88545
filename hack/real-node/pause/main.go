// Command pause is the process of every pod sandbox on the real node (containerd's sandbox_image):
// it holds the pod's namespaces, reaps the children it inherits as a PID 1 must, and exits 0 on
// SIGINT or SIGTERM. Built by hack/build-go-tools.sh pause: no image is pulled for it.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reapChildren()
	}
}

// reapChildren collects every exited child, so that none stays a zombie in a shared PID namespace.
func reapChildren() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
