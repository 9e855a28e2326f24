/*
 * fair-lock.pml: the fair lock's queue protocol (lua-scripts/fair-lock/*.lua and the engine's
 * wait loop as the fair lock uses it), for spin.
 *
 * Three clients A, B, C (ids 0, 1, 2), one owner each, contend for one fair lock. Redis runs
 * each script atomically. Time is an integer clock in ticks, every time stamp kept relative to
 * the present (as in latchkey.pml), so the state space is finite with no horizon on the clock.
 * Within one tick every process that is not stalled does what is due (a message read, a timer
 * fired, a request executed): the clock only advances once nothing is due, except for a stalled
 * client, which may let any number of ticks pass before it acts again, or never act again (a
 * crash). model/README.md says what is modelled and what is abstracted; model/run.sh runs the
 * checked configurations.
 *
 * Compile-time switches (spin -D...):
 *   L            lease in ticks (default 4)
 *   W            waiter timeout in ticks: a queued owner's heartbeat deadline is now + W after its
 *                latest attempt (default 3)
 *   HB           heartbeat: a waiter attempts at least every HB ticks (default W / 3, at least 1)
 *   KA, KB, KC   acquire calls client A, B, C makes, one after another (default 1 each)
 *   MAXS         stalls in the whole run (a stall may never end: a crash) (default 1)
 *   MAXG         callers that give up (abort or deadline) while waiting (default 1)
 *   MAXF         network faults: lost requests and replies, late copies of an acquire (default 0)
 *   MAXD         wake-up messages lost or delivered late (default 1)
 *   LINEB        the bound of no_stuck_line, in ticks (default (MAXS + MAXF) * (W + HB))
 * Defect variants (each must make a property fail):
 *   NO_HEARTBEAT       a waiter's heartbeat deadline is set once, when it is queued, not moved
 *                      on by later attempts
 *   NO_STEP_FLOOR      a waiter's deadline in redisson_lock_timeout is not kept one wait step per
 *                      waiter ahead beyond its heartbeat (it is now + W, as before RFairLock's
 *                      arithmetic was followed): a take moves it into the past
 *   NO_STALE_DROP      scripts never drop a head whose deadline passed
 *   LEAVE_KEEPS_ENTRY  leave.lua does not take the owner out of the queue and the timeouts
 *   LEAVE_WAKES_NOBODY leave.lua does not wake the new head when the head leaves a free lock
 *   REFUSE_BEFORE_QUEUE  acquire.lua refuses a cancelled request (request key set) before it
 *                      queues the owner, not only before it takes the lock (a candidate fix)
 * Mixed lines:
 *   REDISSON_A         client A takes the lock with RedissonFairLock's acquire script (it takes
 *                      one wait step off every waiter's deadline, as latchkey's take does, but
 *                      it neither reads nor writes heartbeats)
 *   NO_MUTEX, NO_BACKED, NO_STUCK, NO_FIFO, NO_WAKEUP, NO_LEAVE   leave one property out
 */

/* ---------------------------------------------------------------- bounds */
#ifndef L
#define L 4
#endif
#ifndef W
#define W 3
#endif
#ifndef HB
#if W >= 6
#define HB (W / 3)
#else
#define HB 1
#endif
#endif
#ifndef KA
#define KA 1
#endif
#ifndef KB
#define KB 1
#endif
#ifndef KC
#define KC 1
#endif
#ifndef MAXS
#define MAXS 1
#endif
#ifndef MAXG
#define MAXG 1
#endif
#ifndef MAXF
#define MAXF 0
#endif
#ifndef MAXD
#define MAXD 1
#endif
#ifndef LINEB
/* each owner that stops asking while queued (a stall or crash), and each entry a late copy of
   an acquire leaves behind, may hold the line up until its deadline lapses */
#define LINEB ((MAXS + MAXF > 0 -> MAXS + MAXF : 1) * (W + HB))
#endif

#define NC    3           /* clients A, B, C */
#define NB    255         /* no owner */
#define KOF(c) ((c) == 0 -> KA : ((c) == 1 -> KB : KC))
#define NAME(c) (65 + (c))
#define MIN(a, b) ((a) < (b) -> (a) : (b))

/* client phases: where the acquire call of src/engine/acquire.ts stands */
#define IDLE 0   /* no acquire call running (chain work may still be queued) */
#define INF  1   /* acquire request in flight */
#define WAIT 2   /* the wait loop: a message or the timer wakes it */
#define HOLD 3   /* holding (count 1) */
#define LINF 4   /* the caller gave up with an acquire request in flight */
#define WAITING(c) (cl[c].ph == INF || cl[c].ph == WAIT)

/* requests: one slot per client, as OperationChains serializes an owner's calls on a lock */
#define NONE    0
#define ACQ     1   /* fair-lock/acquire.lua (waiting = 1) */
#define RELEASE 2   /* fair-lock/release.lua (count 1: the last hold) */
#define RENEW   3   /* lock/renew.lua */
#define LEAVE   4   /* fair-lock/leave.lua */
#define CANCEL  5   /* fair-lock/cancel-acquire.lua */
#define ABANDON 6   /* fair-lock/abandon.lua */
#define SENT 1
#define LOST 2      /* executed with the reply lost: the client times out */

/* replies of acquire.lua */
#define TAKEN     1  /* nil */
#define BUSY      2  /* {wait} */
#define CANCELLED 3  /* -3 */

/* ---------------------------------------------------------------- Redis */
hidden byte clk;          /* absolute time, for the trail printout only (not in the state) */
byte owner = NB;          /* lock hash: its one owner field (hold count 1); NB: no key */
byte ttl;                 /* its PTTL in ticks; expiry deletes it */
byte q[NC];               /* redisson_lock_queue: client + 1, head first; 0 empty */
byte qlen;
#define INQ(c) (q[0] == (c) + 1 || q[1] == (c) + 1 || q[2] == (c) + 1)

/* ---------------------------------------------------------------- clients */
typedef Cl {
  /* Redis: the owner's entries in redisson_lock_timeout and {name}:latchkey_heartbeats (kept here
     to pack the state). The deadline in redisson_lock_timeout follows RFairLock's arithmetic in
     wait steps (Redisson's threadWaitTime, minutes: longer than anything else here), so it is kept
     as the number of steps it lies beyond the heartbeat deadline: each take, and each leave ahead
     of the owner, takes one off; one more than it has makes it pass. */
  bit z;                 /* it has a score (and, for a latchkey waiter, a heartbeat) */
  unsigned dl : 3;       /* heartbeat deadline - now in ticks, 0 once passed (dropped at the head) */
  unsigned rs : 2;       /* wait steps its deadline lies beyond the heartbeat deadline */
  bit lp;                /* its deadline has passed (dropped at the head) */
  /* the client */
  unsigned ph : 3;       /* phase, above */
  unsigned nacq : 2;     /* acquire calls made */
  bit st;                /* stalled (a crash is a stall that never ends) */
  unsigned tmr : 3;      /* wait loop: ticks until the re-check; min(reply's wait, HB) */
  unsigned vu : 3;       /* Hold: validUntil - now, 0 once passed */
  bit lv;                /* leave queued on the owner's chain */
  bit rl;                /* release or abandon queued on the chain after it */
  /* the request slot */
  unsigned rqk : 3;
  unsigned rqs : 2;
  /* a late copy of an acquire request, on its way to Redis; at most one per client */
  bit late;
  bit lcr;               /* its request key exists: cancel-acquire.lua ran for it */
  /* its channel redisson_lock__channel:{name}:<owner> */
  bit pm;                /* a `0` published, not yet delivered or lost */
  bit lw;                /* ... delivered late: still on its way */
  bit wk;                /* an unread `0` */
  /* ghosts */
  bit sdy;               /* steady: an acquire under way that has not stalled or given up */
  bit gone;              /* leave.lua ran for it and no acquire began since */
}
Cl cl[NC];

/* fault budgets used */
byte ns, ng, nf, nd;

/* ghosts for the bounded-response properties (saturated) */
byte lineAge;            /* ticks the lock has been free while a steady waiter waits */
byte wakeAge;            /* ticks the lock has been free while one steady waiter heads the line */
byte wakeHd;             /* ... that waiter, + 1 */
bit unheard;             /* since the lock was last held, a wake-up was lost or delayed, or a
                            queued deadline lapsed (a lapse wakes nobody: the next head finds
                            out by its timer) */

/* scratch, not part of the state */
hidden byte idx, ent, res, rpl, rpt;
hidden byte wasHead, pl, stp;
hidden byte byScore;      /* RedissonFairLock's stale drop: by the deadline alone, not heartbeats */
/* property names, for the assertion messages */
hidden byte mutual_exclusion, hold_backed_by_redis, no_stuck_line, fifo, no_lost_wakeup,
  leave_leaves_nothing, queue_agrees_with_timeouts;

/* ---------------------------------------------------------------- properties */
#define VALID(c) (cl[c].ph == HOLD && cl[c].vu > 0)
#define MUTEX (!(VALID(0) && VALID(1)) && !(VALID(0) && VALID(2)) && !(VALID(1) && VALID(2)))
#define BACKED(c) (!VALID(c) || (owner == (c) && ttl >= cl[c].vu))
#define STEADY(c) (cl[c].sdy && WAITING(c))
#define LIVEENT(i) (q[i] != 0 && cl[q[i] - 1].z && cl[q[i] - 1].dl > 0 && !cl[q[i] - 1].lp)
/* the head once stale heads are dropped, + 1; 0 none */
#define EHEAD (LIVEENT(0) -> q[0] : (LIVEENT(1) -> q[1] : (LIVEENT(2) -> q[2] : 0)))
#ifdef REDISSON_A
/* A drops stale heads by their deadlines alone, as Redisson does: a dead latchkey waiter ahead of
   it lapses by its deadline in wait steps (minutes, beyond the model's ticks), unless a latchkey
   waiter's call drops it by its heartbeat. So the bound holds for latchkey's waiters. */
#define LINEWAITS (STEADY(1) || STEADY(2))
#define HEADWAITS (EHEAD > 1 && STEADY(EHEAD - 1))
#else
#define HEADWAITS (EHEAD != 0 && STEADY(EHEAD - 1))
#define LINEWAITS (STEADY(0) || STEADY(1) || STEADY(2))
#endif
#define AGREE(c) (INQ(c) == cl[c].z)
#define LEFT(c) (!cl[c].gone || (!INQ(c) && !cl[c].z))

/* ---------------------------------------------------------------- queue */
/* LREM queue 0 c + ZREM timeouts c */
inline takeOut(c) {
  idx = 0;
  do
  :: idx >= qlen -> break
  :: idx < qlen && q[idx] != (c) + 1 -> idx++
  :: idx < qlen && q[idx] == (c) + 1 ->
     do
     :: idx + 1 < qlen -> q[idx] = q[idx + 1]; idx++
     :: else -> break
     od;
     qlen--;
     q[qlen] = 0;
     break
  od;
  idx = 0;
  cl[c].z = 0; cl[c].dl = 0; cl[c].rs = 0; cl[c].lp = 0
}

/* the place of c in the queue (0 the head), into pl; NC when not queued */
inline placeOf(c) {
  pl = (q[0] == (c) + 1 -> 0 : (q[1] == (c) + 1 -> 1 : (q[2] == (c) + 1 -> 2 : NC)))
}

/* fair-queue.lua moveAllDeadlines / shiftDeadlines with -step: one wait step off the deadline of
   every waiter from place `from` on */
inline stepOff(from) {
  idx = from;
  do
  :: idx < qlen ->
     if
     :: cl[q[idx] - 1].rs > 0 -> cl[q[idx] - 1].rs--
     :: else -> cl[q[idx] - 1].lp = 1
     fi;
     idx++
  :: else -> break
  od;
  idx = 0
}

/* shiftDeadlines with +delta: `steps` whole wait steps onto every waiter from place `from` on
   (a delta that is not a whole number of steps is rounded down: fewer steps, never more) */
inline stepOn(from, steps) {
  idx = from;
  do
  :: idx < qlen ->
     cl[q[idx] - 1].rs = MIN(3, cl[q[idx] - 1].rs + (cl[q[idx] - 1].lp -> 0 : steps));
     idx++
  :: else -> break
  od;
  idx = 0
}

/* include/fair-queue.lua dropStaleHeads: a head whose score passed, or with no score, goes */
inline dropStale() {
#ifndef NO_STALE_DROP
  do
  :: qlen > 0 && cl[q[0] - 1].z && (cl[q[0] - 1].dl > 0 || byScore) && !cl[q[0] - 1].lp -> break
  :: qlen > 0 && !(cl[q[0] - 1].z && (cl[q[0] - 1].dl > 0 || byScore) && !cl[q[0] - 1].lp) ->
     ent = q[0] - 1;
     printf("@ t=%d Redis: drops stale head %c\n", clk, NAME(ent));
#ifndef NO_FIFO
     if                                  /* a steady waiter never loses its place */
     :: STEADY(ent) -> fifo = false; assert(fifo)
     :: else
     fi;
#endif
     q[0] = q[1]; q[1] = q[2]; q[2] = 0; qlen--;
     cl[ent].z = 0; cl[ent].dl = 0; cl[ent].rs = 0; cl[ent].lp = 0;
     ent = 0
  :: qlen == 0 -> break
  od
#else
  skip
#endif
}

/* PUBLISH <channel>:<owner> 0; delivered (or lost, or late) by the client's Net process */
inline wakeHead() {
  if
  :: qlen > 0 ->
     printf("@ t=%d Redis: publishes 0 to head %c\n", clk, NAME(q[0] - 1));
     cl[q[0] - 1].pm = 1
  :: else
  fi
}

/* include/fair-queue.lua leaveQueue (its caller dropped stale heads first): those behind the
   owner lose one wait step, as Redisson's acquireFailed takes it off */
inline leaveQueue(c) {
  wasHead = (qlen > 0 && q[0] == (c) + 1);
#ifndef LEAVE_KEEPS_ENTRY
  placeOf(c);
  if :: pl < NC -> stepOff(pl + 1) :: else fi;
  pl = 0;
  takeOut(c);
#endif
  if
  :: wasHead && owner == NB ->
     dropStale();
#ifndef LEAVE_WAKES_NOBODY
     wakeHead();
#endif
     skip
  :: else
  fi;
  wasHead = 0
}

/* ---------------------------------------------------------------- scripts */

/* fair-lock/acquire.lua with expected = 0, waiting = 1; rec: its request key exists. With
   REDISSON_A, client A's calls drop stale heads as RedissonFairLock's script does (by deadline
   only) and take as it does; A still waits as latchkey's waiters do. */
inline acquireScript(c, rec, rep, pt) {
#ifdef REDISSON_A
  byScore = ((c) == 0);
#endif
  dropStale();
  byScore = 0;
  if
  :: owner == c ->                      /* held == expected + 1: a replay, or a late copy */
     ttl = L; takeOut(c); rep = TAKEN
  :: owner == NB && (qlen == 0 || q[0] == (c) + 1) && rec ->
     rep = CANCELLED
  :: owner == NB && (qlen == 0 || q[0] == (c) + 1) && !rec ->
     owner = c; ttl = L; takeOut(c); rep = TAKEN;
     stepOff(0);                        /* every waiter left: one wait step off (latchkey's take
                                           and RedissonFairLock's alike) */
     lineAge = 0; wakeAge = 0; wakeHd = 0; unheard = 0   /* ghosts: the line moved */
#ifdef REFUSE_BEFORE_QUEUE
  :: owner != c && rec -> rep = CANCELLED    /* the request key read before queueing too */
#endif
  :: else ->                            /* held by another, or free with another at the head */
     pt = (owner != NB -> ttl : cl[q[0] - 1].dl);
     if
     :: !INQ(c) ->                      /* joins: the last waiter's deadline plus one wait step */
        if
        :: qlen > 0 && !cl[q[qlen - 1] - 1].lp -> cl[c].rs = MIN(3, cl[q[qlen - 1] - 1].rs + 1)
        :: else -> cl[c].rs = 0
        fi;
        cl[c].lp = 0;
        q[qlen] = (c) + 1; qlen++; cl[c].z = 1; cl[c].dl = W
     :: else
#ifndef NO_HEARTBEAT
        cl[c].dl = W                    /* ZADD heartbeats now + W: every attempt keeps the place */
#endif
     fi;
#ifndef NO_STEP_FLOOR
     placeOf(c);                        /* its deadline kept a step per waiter ahead beyond the
                                           heartbeat; raising it raises those behind as much */
     if
     :: cl[c].lp || cl[c].rs < pl ->
        stp = (cl[c].lp -> pl : pl - cl[c].rs);
        cl[c].rs = pl; cl[c].lp = 0;
        stepOn(pl + 1, stp)
     :: else
     fi;
     pl = 0; stp = 0;
#else
     cl[c].rs = 0; cl[c].lp = 0;        /* ZADD now + W, as before */
#endif
     rep = BUSY
  fi
}

/* fair-lock/release.lua (expected 1) and fair-lock/abandon.lua: drop stale heads; the last
   hold frees the lock and wakes the head */
inline releaseScript(c) {
  dropStale();
  if
  :: owner == c -> owner = NB; ttl = 0; wakeHead()
  :: else                               /* nil: holds nothing (lost) */
  fi
}

/* lock/renew.lua */
inline renewScript(c, rep) {
  if
  :: owner == c -> ttl = L; rep = 1
  :: else -> rep = 0
  fi
}

/* fair-lock/leave.lua */
inline leaveScript(c) {
  dropStale();
  leaveQueue(c)
}

/* fair-lock/cancel-acquire.lua (expected 0): drop stale heads, record, leave the queue, undo a
   hold the request made */
inline cancelScript(c) {
  dropStale();
  if :: cl[c].late -> cl[c].lcr = 1 :: else fi;   /* SET request key PX */
  leaveQueue(c);
  if
  :: owner == c -> owner = NB; ttl = 0; wakeHead()
  :: else
  fi
}

/* ---------------------------------------------------------------- client helpers */

inline send(c, kind) {
  cl[c].rqk = kind; cl[c].rqs = SENT
}

inline clearSlot(c) {
  cl[c].rqk = NONE; cl[c].rqs = 0; rpl = 0; rpt = 0
}

/* the attempt's reply (handled as it is executed: handling it later is the same as a stall) */
inline onAcquireReply(c) {
  assert(rpl != CANCELLED);          /* only late copies are ever refused */
  cl[c].rqk = NONE; cl[c].rqs = 0;
  if
  :: cl[c].ph == INF && rpl == TAKEN -> cl[c].ph = HOLD; cl[c].vu = L; cl[c].sdy = 0; cl[c].wk = 0
  :: cl[c].ph == INF && rpl == BUSY ->
     cl[c].ph = WAIT; cl[c].tmr = (rpt == 0 -> 1 : MIN(rpt, HB))   /* a wait of 0 still lets a tick pass */
  :: cl[c].ph == LINF && rpl == TAKEN -> cl[c].ph = IDLE; cl[c].rl = 1   /* given straight back */
  :: cl[c].ph == LINF && rpl == BUSY -> cl[c].ph = IDLE
  fi;
  rpl = 0; rpt = 0
}

/* the attempt timed out (Calls.idempotent): the engine sends the request again ... */
inline retryAttempt(c) {
  printf("@ t=%d %c: acquire timed out, sent again\n", clk, NAME(c));
  cl[c].rqs = SENT
}

/* ... or gives up: #cancelAcquire on the chain, the call fails, then leave */
inline failAttempt(c) {
  printf("@ t=%d %c: acquire timed out for good: cancel-acquire, then leave\n", clk, NAME(c));
  send(c, CANCEL);
  cl[c].ph = IDLE; cl[c].lv = 1; cl[c].sdy = 0; cl[c].wk = 0
}

/* Something is due for c now: the clock waits for it (unless c is stalled). A request on its
   way is executed at once (the network is prompt; its faults are budgeted) and a published
   message reaches the client's connection at once, stalled or not. */
#define DUE(c) (cl[c].rqs == SENT || cl[c].pm || \
  (!cl[c].st && ((cl[c].ph == WAIT && (cl[c].wk || cl[c].tmr == 0)) || cl[c].rqs == LOST || \
                 (cl[c].rqk == NONE && (cl[c].lv || cl[c].rl)))))

/* ---------------------------------------------------------------- processes */

proctype Client(byte c) {
end:
  do
  /* FairLock.acquire: a new call; its first attempt (behind the chain's earlier work) */
  :: d_step { !cl[c].st && cl[c].ph == IDLE && cl[c].nacq < KOF(c) && cl[c].rqk == NONE &&
              !cl[c].lv && !cl[c].rl ->
       cl[c].nacq++; cl[c].sdy = 1; cl[c].gone = 0; cl[c].wk = 0;
       send(c, ACQ); cl[c].ph = INF;
       printf("@ t=%d %c: acquire\n", clk, NAME(c)) }

  /* the wait loop wakes: a message on its channel, or the re-check / heartbeat timer */
  :: d_step { !cl[c].st && cl[c].ph == WAIT && (cl[c].wk || cl[c].tmr == 0) ->
       printf("@ t=%d %c: wakes (%d message, %d timer); attempts\n", clk, NAME(c), cl[c].wk, cl[c].tmr == 0);
       cl[c].wk = 0; cl[c].tmr = 0;
       send(c, ACQ); cl[c].ph = INF }

  /* abort or deadline: the call ends; leave goes on the chain after the attempt in flight */
  :: d_step { !cl[c].st && WAITING(c) && ng < MAXG ->
       ng++;
       printf("@ t=%d %c: gives up\n", clk, NAME(c));
       cl[c].sdy = 0; cl[c].lv = 1; cl[c].wk = 0; cl[c].tmr = 0;
       cl[c].ph = (cl[c].ph == INF -> LINF : IDLE) }

  /* the attempt's reply never comes */
  :: d_step { !cl[c].st && cl[c].rqk == ACQ && cl[c].rqs == LOST -> retryAttempt(c) }
  :: d_step { !cl[c].st && cl[c].rqk == ACQ && cl[c].rqs == LOST -> failAttempt(c) }

  /* chain work: leave.lua, then a release of a hold taken after giving up (or abandon) */
  :: d_step { !cl[c].st && cl[c].rqk == NONE && cl[c].lv ->
       cl[c].lv = 0; send(c, LEAVE);
       printf("@ t=%d %c: leave sent\n", clk, NAME(c)) }
  :: d_step { !cl[c].st && cl[c].rqk == NONE && !cl[c].lv && cl[c].rl ->
       cl[c].rl = 0; send(c, ABANDON);
       printf("@ t=%d %c: gives back a hold it no longer wants\n", clk, NAME(c)) }

  /* Watchdog: renew */
  :: d_step { !cl[c].st && cl[c].ph == HOLD && cl[c].rqk == NONE && cl[c].vu < L -> send(c, RENEW) }

  /* Lease.release: stops believing it holds when the request goes out */
  :: d_step { !cl[c].st && cl[c].ph == HOLD && cl[c].rqk == NONE ->
       cl[c].ph = IDLE; cl[c].vu = 0; send(c, RELEASE);
       printf("@ t=%d %c: release sent\n", clk, NAME(c)) }

  /* Watchdog #expire: no renewal confirmed within the lease: lost, abandon queued */
  :: d_step { !cl[c].st && cl[c].ph == HOLD && cl[c].vu == 0 ->
       cl[c].ph = IDLE; cl[c].rl = 1;
       printf("@ t=%d %c: lease ran out locally: lock lost\n", clk, NAME(c)) }

  /* a stall of any length (one that never ends is a crash) */
  :: d_step { !cl[c].st && ns < MAXS && (cl[c].ph != IDLE || cl[c].lv || cl[c].rl) ->
       ns++; cl[c].st = 1; cl[c].sdy = 0;
       printf("@ t=%d %c: stalls\n", clk, NAME(c)) }
  :: d_step { cl[c].st -> cl[c].st = 0; printf("@ t=%d %c: runs again\n", clk, NAME(c)) }
  od
}

/* The client's connection to Redis and its subscriber: executes its requests (loses some),
   delivers the messages published on its channel (loses some, delays some). */
proctype Net(byte c) {
end:
  do
  :: d_step { cl[c].rqs == SENT && cl[c].rqk == ACQ ->
       acquireScript(c, 0, rpl, rpt);
       printf("@ t=%d Redis: acquire(%c) -> %d (wait %d)\n", clk, NAME(c), rpl, rpt);
       onAcquireReply(c) }
  :: d_step { cl[c].rqs == SENT && cl[c].rqk == RELEASE ->
       printf("@ t=%d Redis: release(%c)\n", clk, NAME(c));
       releaseScript(c); clearSlot(c) }
  :: d_step { cl[c].rqs == SENT && cl[c].rqk == ABANDON ->
       printf("@ t=%d Redis: abandon(%c)\n", clk, NAME(c));
       releaseScript(c); clearSlot(c) }
  :: d_step { cl[c].rqs == SENT && cl[c].rqk == RENEW ->
       renewScript(c, rpl);
       if
       :: cl[c].ph == HOLD && rpl == 1 -> cl[c].vu = L
       :: cl[c].ph == HOLD && rpl == 0 -> cl[c].ph = IDLE; cl[c].vu = 0
       :: else
       fi;
       clearSlot(c) }
  :: d_step { cl[c].rqs == SENT && cl[c].rqk == LEAVE ->
       printf("@ t=%d Redis: leave(%c)\n", clk, NAME(c));
       leaveScript(c);
       cl[c].gone = (cl[c].ph == IDLE);
       clearSlot(c) }
  :: d_step { cl[c].rqs == SENT && cl[c].rqk == CANCEL ->
       printf("@ t=%d Redis: cancel-acquire(%c)\n", clk, NAME(c));
       cancelScript(c); clearSlot(c) }

  /* faults: an acquire executed with its reply lost; one not executed yet (late copy) or
     never; any other request lost (leave: its retries all failed) */
  :: d_step { cl[c].rqs == SENT && cl[c].rqk == ACQ && nf < MAXF ->
       nf++;
       acquireScript(c, 0, rpl, rpt);
       printf("@ t=%d Redis: acquire(%c) -> %d, reply lost\n", clk, NAME(c), rpl);
       rpl = 0; rpt = 0;
       cl[c].rqs = LOST }
  :: d_step { cl[c].rqs == SENT && cl[c].rqk == ACQ && nf < MAXF && !cl[c].late ->
       nf++;
       printf("@ t=%d net: acquire(%c) delayed\n", clk, NAME(c));
       cl[c].late = 1; cl[c].lcr = 0;
       cl[c].rqs = LOST }
  :: d_step { cl[c].rqs == SENT && nf < MAXF ->
       nf++;
       printf("@ t=%d net: request %d of %c lost\n", clk, cl[c].rqk, NAME(c));
       if
       :: cl[c].rqk == ACQ -> cl[c].rqs = LOST
       :: else -> clearSlot(c)
       fi }

  /* the late copy arrives (its reply goes nowhere), or never does */
  :: d_step { cl[c].late ->
       acquireScript(c, cl[c].lcr, res, ent);
       printf("@ t=%d Redis: late copy of acquire(%c) -> %d\n", clk, NAME(c), res);
       cl[c].late = 0; cl[c].lcr = 0; res = 0; ent = 0 }
  :: d_step { cl[c].late -> cl[c].late = 0; cl[c].lcr = 0 }

  /* a published `0` reaches the subscriber: only a waiting acquire listens */
  :: d_step { cl[c].pm -> cl[c].pm = 0; if :: WAITING(c) -> cl[c].wk = 1 :: else fi }
  :: d_step { cl[c].pm && nd < MAXD ->
       nd++; cl[c].pm = 0; unheard = 1;
       printf("@ t=%d net: message to %c lost\n", clk, NAME(c)) }
  :: d_step { cl[c].pm && nd < MAXD && !cl[c].lw ->
       nd++; cl[c].pm = 0; cl[c].lw = 1; unheard = 1;
       printf("@ t=%d net: message to %c late\n", clk, NAME(c)) }
  :: d_step { cl[c].lw -> cl[c].lw = 0; if :: WAITING(c) -> cl[c].wk = 1 :: else fi }
  od
}

/* Time passes once nothing is due (stalled clients aside). Expiry is lazy in Redis; doing it
   here at once changes nothing a script or property can see. */
active proctype Clock() {
  /* no end label: a state where time cannot pass and nothing else can happen is reported */
  do
  :: d_step { !DUE(0) && !DUE(1) && !DUE(2) ->
       clk++;
       /* ghosts, for the state the tick leaves behind: did the line stand still? */
       if
       :: owner == NB && LINEWAITS -> if :: lineAge <= LINEB -> lineAge++ :: else fi
       :: else -> lineAge = 0
       fi;
       if
       :: owner == NB && HEADWAITS && EHEAD == wakeHd -> if :: wakeAge <= HB -> wakeAge++ :: else fi
       :: owner == NB && HEADWAITS && EHEAD != wakeHd -> wakeHd = EHEAD; wakeAge = 1
       :: else -> wakeHd = 0; wakeAge = 0
       fi;
       if :: owner != NB -> unheard = 0 :: else fi;
       if
       :: owner != NB ->
          ttl--;
          if
          :: ttl == 0 -> printf("@ t=%d Redis: lock of %c expired\n", clk, NAME(owner)); owner = NB
          :: else
          fi
       :: else
       fi;
       idx = 0;
       do
       :: idx < NC ->
          if
          :: cl[idx].dl > 0 ->
             cl[idx].dl--;
             if :: cl[idx].dl == 0 && owner == NB -> unheard = 1 :: else fi
          :: else
          fi;
          if :: cl[idx].tmr > 0 -> cl[idx].tmr-- :: else fi;
          if :: cl[idx].vu > 0 -> cl[idx].vu-- :: else fi;
          idx++
       :: else -> break
       od;
       idx = 0 }
  od
}

active proctype Monitor() {
end:
  do
#ifndef NO_MUTEX
  :: d_step { !MUTEX -> mutual_exclusion = false; assert(mutual_exclusion) }
#endif
#ifndef NO_BACKED
  :: d_step { !(BACKED(0) && BACKED(1) && BACKED(2)) ->
       hold_backed_by_redis = false; assert(hold_backed_by_redis) }
#endif
#ifndef NO_STUCK
  :: d_step { lineAge > LINEB -> no_stuck_line = false; assert(no_stuck_line) }
#endif
#ifndef NO_WAKEUP
  :: d_step { wakeAge > (unheard -> HB : 0) -> no_lost_wakeup = false; assert(no_lost_wakeup) }
#endif
#ifndef NO_LEAVE
  :: d_step { !(LEFT(0) && LEFT(1) && LEFT(2)) ->
       leave_leaves_nothing = false; assert(leave_leaves_nothing) }
#endif
  :: d_step { !(AGREE(0) && AGREE(1) && AGREE(2)) ->
       queue_agrees_with_timeouts = false; assert(queue_agrees_with_timeouts) }
  od
}

init {
  atomic {
    run Client(2); run Client(1); run Client(0);
    run Net(0); run Net(1); run Net(2)
  }
}
