// Command go-etcd-mutex is a lockcheck reference client (protocol version 1,
// docs/check-your-lock.md, "Your lock library, against real servers"): etcd's own Go client,
// clientv3/concurrency's Mutex over a Session, from Debian's golang-etcd-server-dev (etcd
// 3.4.23), the library lockcheck's etcd-mutex renders (its etcd-3.4 variant follows this very
// source).
//
// Build (GOPATH mode: Debian ships Go libraries as source under /usr/share/gocode, and no module
// is fetched):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o DIR/go-etcd-mutex clients/go-etcd-mutex/main.go
//
// Run: lockcheck real --algorithm etcd-mutex --faults pause --client DIR/go-etcd-mutex
//
// The client keeps one session (a lease of LOCKCHECK_TTL_MS, rounded up to whole seconds, kept
// alive by the library) and makes a new one only when the old one is Done, as an application
// that holds a session for its lifetime does. Each acquisition is a new Mutex on the key
// LOCKCHECK_KEY, locked with a context that ends after wait_ms; the token is the key's create
// revision (read after Lock, the fencing token etcd's lock gives). Released by Unlock; an Unlock
// that fails is an error, and a session found Done at release is reported lost.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
)

var out = bufio.NewWriter(os.Stdout)
var in = bufio.NewReader(os.Stdin)

func say(message map[string]interface{}) {
	message["v"] = 1
	line, err := json.Marshal(message)
	if err != nil {
		fmt.Fprintln(os.Stderr, "go-etcd-mutex: encoding a line:", err)
		os.Exit(1)
	}
	out.Write(line)
	out.WriteString("\n")
	out.Flush()
}

func hear() map[string]interface{} {
	line, err := in.ReadString('\n')
	if err != nil {
		// lockcheck is gone.
		os.Exit(0)
	}
	var message map[string]interface{}
	if err := json.Unmarshal([]byte(line), &message); err != nil {
		fmt.Fprintln(os.Stderr, "go-etcd-mutex: not a protocol line:", line)
		os.Exit(1)
	}
	return message
}

func number(message map[string]interface{}, field string) int64 {
	value, _ := message[field].(float64)
	return int64(value)
}

// access asks lockcheck to touch the resource; true when it accepted the access.
func access(phase string) bool {
	say(map[string]interface{}{"op": "access", "phase": phase})
	accepted, _ := hear()["accepted"].(bool)
	return accepted
}

func main() {
	if os.Getenv("LOCKCHECK_PROTOCOL") != "1" {
		fmt.Fprintf(os.Stderr, "this client speaks lockcheck's protocol version 1, lockcheck speaks %q\n",
			os.Getenv("LOCKCHECK_PROTOCOL"))
		os.Exit(1)
	}
	var endpoints []string
	for _, server := range strings.Split(os.Getenv("LOCKCHECK_SERVERS"), ",") {
		endpoints = append(endpoints, "http://"+server)
	}
	key := "/" + os.Getenv("LOCKCHECK_KEY")
	ttlMs, err := strconv.Atoi(os.Getenv("LOCKCHECK_TTL_MS"))
	if err != nil || ttlMs <= 0 {
		fmt.Fprintln(os.Stderr, "go-etcd-mutex: LOCKCHECK_TTL_MS is not a positive number")
		os.Exit(1)
	}
	ttlS := (ttlMs + 999) / 1000

	client, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 10 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "go-etcd-mutex: connecting:", err)
		os.Exit(1)
	}
	defer client.Close()
	var session *concurrency.Session
	say(map[string]interface{}{"op": "ready"})
	for {
		command := hear()
		if command["op"] == "stop" {
			return
		}
		wait := time.Duration(number(command, "wait_ms")) * time.Millisecond
		hold := time.Duration(number(command, "hold_ms")) * time.Millisecond
		probe, _ := command["probe"].(bool)
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		if session != nil {
			select {
			case <-session.Done():
				session = nil
			default:
			}
		}
		if session == nil {
			session, err = concurrency.NewSession(client, concurrency.WithTTL(ttlS))
			if err != nil {
				cancel()
				session = nil
				say(map[string]interface{}{"op": "error", "reason": "NewSession: " + err.Error()})
				continue
			}
		}
		mutex := concurrency.NewMutex(session, key)
		err = mutex.Lock(ctx)
		cancel()
		if err == context.DeadlineExceeded {
			say(map[string]interface{}{"op": "not_acquired"})
			continue
		}
		if err != nil {
			say(map[string]interface{}{"op": "error", "reason": "Lock: " + err.Error()})
			continue
		}
		acquired := map[string]interface{}{"op": "acquired", "token": mutex.Key()}
		read, cancelRead := context.WithTimeout(context.Background(), 5*time.Second)
		if got, err := client.Get(read, mutex.Key()); err == nil && len(got.Kvs) == 1 {
			acquired["token"] = got.Kvs[0].CreateRevision
		}
		cancelRead()
		say(acquired)
		if !probe && access("enter") {
			time.Sleep(hold)
			access("exit")
		}
		lost := false
		select {
		case <-session.Done():
			lost = true
		default:
		}
		release, cancelRelease := context.WithTimeout(context.Background(), 10*time.Second)
		err = mutex.Unlock(release)
		cancelRelease()
		switch {
		case err != nil:
			say(map[string]interface{}{"op": "error", "reason": "Unlock: " + err.Error()})
		case lost:
			say(map[string]interface{}{"op": "lost", "reason": "the session's lease expired while held"})
		default:
			say(map[string]interface{}{"op": "released"})
		}
	}
}
