// Command overload offers HTTP point gets to `statestore serve` at a fixed rate, whatever the
// server answers (an open loop: a slow server does not slow the offered load down), or, with
// -clients N, as N closed-loop clients (the server's capacity). It prints one JSON object:
// requests offered and answered by status, and the latencies of the answered ones, measured
// from the moment each request was due (so a queue in the client counts as waiting).
//
//	go run . -url http://127.0.0.1:8000 -store words -keys 20000 -rate 3000 -seconds 15
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"
)

type result struct {
	Mode          string         `json:"mode"`
	OfferedPerS   float64        `json:"offered_per_s"`
	Clients       int            `json:"clients"`
	Seconds       float64        `json:"seconds"`
	Offered       int            `json:"offered"`
	ByStatus      map[string]int `json:"by_status"`
	Errors        int            `json:"errors"`
	ErrorSamples  []string       `json:"error_samples"`
	ShedNoRetry   int            `json:"shed_without_retry_after"`
	ServedPerS    float64        `json:"served_per_s"`
	ServedP50Ms   float64        `json:"served_p50_ms"`
	ServedP99Ms   float64        `json:"served_p99_ms"`
	ShedP99Ms     float64        `json:"shed_p99_ms"`
	ClientBacklog int            `json:"client_backlog_max"`
}

type tally struct {
	sync.Mutex
	byStatus map[string]int
	served   []float64
	shed     []float64
	errors   int
	samples  []string
	noRetry  int
}

func (t *tally) add(status int, retryAfter string, ms float64, err error) {
	t.Lock()
	defer t.Unlock()
	if err != nil {
		t.errors++
		if len(t.samples) < 3 {
			t.samples = append(t.samples, err.Error())
		}
		return
	}
	t.byStatus[fmt.Sprint(status)]++
	switch status {
	case 200:
		t.served = append(t.served, ms)
	case 503:
		t.shed = append(t.shed, ms)
		if retryAfter == "" {
			t.noRetry++
		}
	}
}

func pct(values []float64, p float64) float64 {
	if len(values) == 0 {
		return 0
	}
	sort.Float64s(values)
	i := int(p / 100 * float64(len(values)))
	if i >= len(values) {
		i = len(values) - 1
	}
	return values[i]
}

func main() {
	url := flag.String("url", "http://127.0.0.1:8000", "the API's base URL")
	store := flag.String("store", "words", "the store to read")
	keys := flag.Int("keys", 20000, "keys key-000000000 .. of the store, read at random")
	rate := flag.Float64("rate", 0, "requests offered per second (open loop)")
	clients := flag.Int("clients", 0, "closed-loop clients instead of -rate")
	seconds := flag.Float64("seconds", 15, "how long to offer")
	maxConns := flag.Int("max-conns", 512, "most connections the open loop opens")
	timeout := flag.Duration("timeout", 5*time.Second, "a request not answered within this is an error")
	flag.Parse()

	transport := &http.Transport{MaxIdleConns: *maxConns, MaxIdleConnsPerHost: *maxConns, MaxConnsPerHost: *maxConns}
	client := &http.Client{Transport: transport, Timeout: *timeout}
	t := &tally{byStatus: map[string]int{}}
	get := func(due time.Time, rng *rand.Rand) {
		key := fmt.Sprintf("key-%09d", rng.Intn(*keys))
		resp, err := client.Get(fmt.Sprintf("%s/stores/%s/keys/%s", *url, *store, key))
		ms := float64(time.Since(due).Microseconds()) / 1000
		if err != nil {
			t.add(0, "", ms, err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		t.add(resp.StatusCode, resp.Header.Get("Retry-After"), ms, nil)
	}

	began := time.Now()
	until := began.Add(time.Duration(*seconds * float64(time.Second)))
	offered, backlog := 0, 0
	var wg sync.WaitGroup
	if *clients > 0 {
		var mu sync.Mutex
		for c := 0; c < *clients; c++ {
			wg.Add(1)
			go func(seed int64) {
				defer wg.Done()
				rng := rand.New(rand.NewSource(seed))
				for time.Now().Before(until) {
					mu.Lock()
					offered++
					mu.Unlock()
					get(time.Now(), rng)
				}
			}(int64(c))
		}
	} else {
		interval := time.Duration(float64(time.Second) / *rate)
		inFlight := make(chan struct{}, 1<<20)
		for due := began; due.Before(until); due = due.Add(interval) {
			if wait := time.Until(due); wait > 0 {
				time.Sleep(wait)
			}
			offered++
			inFlight <- struct{}{}
			if len(inFlight) > backlog {
				backlog = len(inFlight)
			}
			wg.Add(1)
			go func(due time.Time, seed int64) {
				defer wg.Done()
				defer func() { <-inFlight }()
				get(due, rand.New(rand.NewSource(seed)))
			}(due, int64(offered))
		}
	}
	wg.Wait()
	wall := time.Since(began).Seconds()
	mode := "open"
	if *clients > 0 {
		mode = "closed"
		wall = *seconds
	}
	out := result{
		Mode: mode, OfferedPerS: *rate, Clients: *clients, Seconds: wall, Offered: offered,
		ByStatus: t.byStatus, Errors: t.errors, ErrorSamples: t.samples, ShedNoRetry: t.noRetry,
		ServedPerS: float64(len(t.served)) / *seconds, ServedP50Ms: pct(t.served, 50),
		ServedP99Ms: pct(t.served, 99), ShedP99Ms: pct(t.shed, 99), ClientBacklog: backlog,
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(1)
	}
}
