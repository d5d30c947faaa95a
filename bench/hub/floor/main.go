// Command floor sends a list of Kubernetes API requests as fast as this machine's apiserver takes them.
//
// It is the benchmarks' reference client: client-go's REST client over HTTP/2, with client-side rate
// limiting switched off and the requests spread over -parallel goroutines.  The hub benchmarks replay
// the exact writes the addon manager made (the same objects, the same sizes) through it, so the time it
// takes is the apiserver's own floor for that work on this machine, and the manager's time is reported
// as a ratio to it.
//
// Input (-requests FILE): a JSON array of {"method", "path", "body", "contentType"}.  Output: one JSON
// object on stdout: {"requests", "errors", "seconds", "firstError"}.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

type request struct {
	Method      string          `json:"method"`
	Path        string          `json:"path"`
	Body        json.RawMessage `json:"body"`
	ContentType string          `json:"contentType"`
}

type result struct {
	Requests   int     `json:"requests"`
	Errors     int64   `json:"errors"`
	Seconds    float64 `json:"seconds"`
	FirstError string  `json:"firstError,omitempty"`
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the apiserver")
	file := flag.String("requests", "", "JSON array of requests to send")
	parallel := flag.Int("parallel", 32, "requests in flight at once")
	flag.Parse()
	if *kubeconfig == "" || *file == "" || *parallel < 1 {
		fmt.Fprintln(os.Stderr, "usage: floor -kubeconfig FILE -requests FILE [-parallel N]")
		os.Exit(2)
	}
	raw, err := os.ReadFile(*file)
	if err != nil {
		fail(err)
	}
	var requests []request
	if err := json.Unmarshal(raw, &requests); err != nil {
		fail(fmt.Errorf("%s: %w", *file, err))
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail(err)
	}
	config.QPS = -1 // no client-side rate limit: the apiserver is the only limit
	config.Burst = -1
	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		fail(err)
	}
	rest := clientset.CoreV1().RESTClient()

	var errors atomic.Int64
	var first sync.Once
	firstError := ""
	next := make(chan request)
	var wg sync.WaitGroup
	started := time.Now()
	for range *parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range next {
				call := rest.Verb(r.Method).AbsPath(r.Path)
				if len(r.Body) > 0 && string(r.Body) != "null" {
					contentType := r.ContentType
					if contentType == "" {
						contentType = "application/json"
					}
					call = call.SetHeader("Content-Type", contentType).Body([]byte(r.Body))
				}
				if err := call.Do(context.Background()).Error(); err != nil {
					errors.Add(1)
					first.Do(func() { firstError = fmt.Sprintf("%s %s: %v", r.Method, r.Path, err) })
				}
			}
		}()
	}
	for _, r := range requests {
		next <- r
	}
	close(next)
	wg.Wait()
	out := result{len(requests), errors.Load(), time.Since(started).Seconds(), firstError}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "floor:", err)
	os.Exit(1)
}
