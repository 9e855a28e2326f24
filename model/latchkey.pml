/*
 * latchkey.pml: the lock / wait-queue / hand-over protocol of latchkey, for spin.
 *
 * Three clients A, B, C (ids 0, 1, 2) contend for one lock. Redis runs each script
 * atomically; time is an integer clock in ticks, kept relative to the present (see the Redis
 * section); the lease is L ticks. model/README.md says what is modelled and what is
 * abstracted; model/run.sh runs the checked configurations.
 *
 * Compile-time switches (spin -D...):
 *   STALE_WITHDRAW_BUG the old withdrawal: `handed` whenever the owner holds nothing locally
 *   STALE_GRANT_BUG   the old protocol: one token per ticket; acquire.lua trusts queuedAs
 *                     without LPOS (see acquireScript)
 *   L                 lease in ticks (even; default 4)
 *   KA, KB, KC        acquire calls client A, B, C makes (default 1 each, at most 3)
 *   WAITERS           bitmask of the clients that wait (A 1, B 2, C 4; default 7); the others
 *                     try once and give up (waitMs 0)
 *   MAXF              network faults: lost requests, lost replies, acquire timeouts (default 1)
 *   MAXD              subscriber disconnects (default 1)
 *   MAXG              callers giving up (abort or deadline) while waiting (default 1)
 *   RENEW_AT          the watchdog renews once validUntil - now < RENEW_AT (default L)
 *   FOREIGN           a fourth client F of Redisson's own protocol waits on the lock too: it
 *                     listens on the unlock channel, takes a free lock by Redisson's script
 *                     (blind to latchkey's queue and reservation) and releases it by
 *                     Redisson's (DEL + PUBLISH 0); KF rounds of it (default 2)
 *   FH                hand-overs to latchkey's queue in a row while F listens (default 2, as
 *                     FOREIGN_HANDOVERS in include/foreign-waiters.lua)
 *   NO_FOREIGN_TURN   the old release: it hands over whoever else listens (a defect, with FOREIGN)
 *   NO_MUTEX, NO_BACKED, NO_STUCK, NO_WAKEUP   leave one property out
 */

/* ---------------------------------------------------------------- bounds */
#ifndef L
#define L 4
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
#ifndef MAXF
#define MAXF 1
#endif
#ifndef WAITERS
#define WAITERS 7         /* bitmask of the clients whose acquire waits (A 1, B 2, C 4); the
                             others try once (waitMs 0: no ticket, never queued) */
#endif
#ifndef MAXD
#define MAXD 1
#endif
#ifndef MAXG
#define MAXG 1
#endif
#ifndef KF
#define KF 2
#endif
#ifndef FH
#define FH 2
#endif
#define FID    3          /* F's owner field */
#ifdef NO_FOREIGN_TURN
#define FTURN 0
#else
#define FTURN (fst == FWAIT && fcnt >= FH)   /* the next free is F's */
#endif
#define RESV   2          /* ticks a free left to F is reserved (FOREIGN_RESERVE_MS) */

#define HALF   (L / 2)
#ifndef RENEW_AT
#define RENEW_AT L        /* the watchdog renews once validUntil - now < RENEW_AT */
#endif
#define NC     3          /* clients A, B, C */
#define QMAX   3          /* wait queue length (checked: queue_bound) */
#define TOKMAX 7          /* token values per client, 1..7 (checked: token_bound) */
#define NB     255        /* no owner */
#define NEVER  255        /* orphanAge when the owner is not an orphan */
#define KOF(c) ((c) == 0 -> KA : ((c) == 1 -> KB : KC))
#define WAITS(c) ((WAITERS >> (c)) & 1)
#define NAME(c) (65 + (c))
#define BIT(k) ((k) != 0 -> (1 << (k)) : 0)
#define HAS(m, k) ((k) != 0 && (((m) >> (k)) & 1))

/* client phases: where the acquire call of src/engine/acquire.ts stands */
#define IDLE 0   /* no acquire call running (may still have background requests) */
#define ATT  1   /* #attempt queued on the owner's chain behind earlier work */
#define INF  2   /* acquire request in flight */
#define LINF 3   /* acquire request in flight, the caller gave up meanwhile */
#define WAIT 4   /* #acquire wait loop */
#define HOLD 5   /* holding: a Hold with count 1 */
#define LIVE(c) (cl[c].ph == ATT || cl[c].ph == INF || cl[c].ph == WAIT)

/* requests (one slot per client: its calls to the lock are serialized) */
#define NONE     0
#define ACQ      1   /* lock/acquire.lua */
#define RENEW    2   /* lock/renew.lua */
#define RELEASE  3   /* lock/release.lua */
#define WITHDRAW 4   /* lock/withdraw.lua */
#define CANCEL   5   /* lock/cancel-acquire.lua */
#define ABANDON  6   /* lock/abandon.lua */
#define SENT 1
#define LOST 3       /* executed with the reply lost (the client times out) */

/* replies of acquire.lua */
#define TAKEN     1  /* nil: owner at count expected + 1 */
#define HELD0     2  /* {pttl, 0}: still queued as queuedAs */
#define HELD1     3  /* {pttl, 1}: waiter pushed */
#define CANCELLED 4  /* -3 */

/* ---------------------------------------------------------------- Redis */
/*
 * Time is kept relative to the present: every time stamp is stored as the ticks left until
 * it (or since it), saturated where a larger value can make no difference. The clock tick
 * shifts them all. The state space is then finite with no horizon on the clock: what is
 * checked holds for runs of any length.
 */
hidden byte clk;          /* absolute time, for the trail printout only (not in the state) */
byte owner = NB;          /* lock hash: the one owner field (hold count 1) */
byte ttl;                 /* lock PTTL in ticks (expireAt - now); 0: no lock (expiry deletes) */
byte q[QMAX];             /* wait queue: entries E(client, token), head first */
byte qlen;
#define E(c, k) ((c) * 8 + (k))
#define INQ(x) (q[0] == (x) || q[1] == (x) || q[2] == (x))
#define QN(c) ((q[0] != 0 && q[0] >> 3 == (c)) + (q[1] != 0 && q[1] >> 3 == (c)) + \
               (q[2] != 0 && q[2] >> 3 == (c)))

/* subscriber connection and its unread messages: fields of Cl below */
#define GB1(c) (cl[c].gb & 7)
#define GB2(c) ((cl[c].gb >> 3) & 7)
#define GB3(c) ((cl[c].gb >> 6) & 7)
#define GBHAS(c, k) ((k) != 0 && (GB1(c) == (k) || GB2(c) == (k) || GB3(c) == (k)))
#define GBN(c) ((GB1(c) != 0) + (GB2(c) != 0) + (GB3(c) != 0))

/* ---------------------------------------------------------------- clients */
#if L <= 7
#define TW 3
#else
#define TW 4
#endif
typedef Cl {
  /* subscriber connection */
  bit conn;              /* connected */
  unsigned gb : 9;       /* unread grant messages: up to 3 tokens, 3 bits each, oldest lowest */
  bit wk;                /* an unread unlock message `0`, or a reconnect, wakes the waiter */
  unsigned ph : 3;       /* phase, above */
  unsigned nacq : 2;     /* acquire calls made */
  /* Ticket */
  unsigned tok : 3;      /* token: the entry believed to be in the queue, 0 none */
  unsigned pend : 3;     /* pending: token of the attempt in flight */
  unsigned gtok : 3;     /* grantedToken: named by the last grant read, 0 none */
  unsigned sage : TW;    /* now - sentAt (sentAt: send time of the latest attempt whose reply
                            was HELD), saturated at HALF: too old to take a grant */
  unsigned tmr : TW;     /* wait timer: ticks until it may fire (pttl of the reply) */
  /* Hold */
  unsigned vu : TW;      /* validUntil - now, 0 once passed */
  /* background work on the owner's chain (src/engine/chains.ts OperationChains) */
  unsigned lm : 8;       /* tokens of tickets that were left (#leftTickets), bitmask */
  unsigned cm : 8;       /* ...of which the ticket was cancelled: never forgotten */
  unsigned wd : 8;       /* withdraw requests queued on the chain, by token */
  bit ab;                /* abandon request queued on the chain */
  unsigned pre : 8;      /* in ATT: chain work queued before the #attempt (bit 0: abandon) */
  /* the request slot */
  unsigned rqk : 3;      /* kind */
  unsigned rqs : 2;      /* status */
  unsigned rqa : 3;      /* acquire: waiter; withdraw: token; cancel: queuedAs */
  unsigned rqb : 3;      /* acquire: queuedAs; cancel: waiter */
  bit rqf;               /* withdraw: handed; cancel: the acquire copy is still on its way */
  unsigned rqage : TW;   /* acquire, renew: now - send time, saturated at L */
  /* a late copy of an acquire request the client gave up on; at most one per client */
  bit late;
  unsigned lw : 3;       /* its waiter */
  unsigned lq : 3;       /* its queuedAs */
  bit lcr                /* its cancel record (request key) exists */
}
Cl cl[NC];

/* fault budgets used */
byte nf, nd, ng;

/* The foreign client F (FOREIGN) and what the scripts keep about it (the foreign key) */
#define FIDLE 0   /* not waiting */
#define FWAIT 1   /* subscribed to the unlock channel, waiting: PUBSUB NUMSUB counts it */
#define FHOLD 2   /* holding (unsubscribed, as Redisson does once it has the lock) */
#define FDONE 3
byte fst;                 /* F's phase */
byte fr;                  /* F's rounds done */
bit fwk;                  /* an unread unlock message `0` for F */
byte fcnt;                /* foreign key: hand-overs in a row while F listened */
byte resv;                /* foreign key: ticks the free left to F stays reserved; 0 none */
/* ghost: hand-overs to latchkey since F last heard the lock announced free while it waited */
byte fpass;

/* ghost: ticks the owner has been an orphan, NEVER when it is not one */
byte orphanAge = NEVER;

/* scratch, not part of the state */
hidden byte ent, tkn, res, idx;
hidden byte rpl, rpt;          /* the reply of the request being executed */
hidden byte removed, found;
/* property names, for the assertion messages */
hidden byte mutual_exclusion, hold_backed_by_redis, no_stuck_lock, no_lost_wakeup, foreign_bounded;
hidden byte queue_bound, token_bound, grant_buffer_bound;

/* ---------------------------------------------------------------- properties */
#define VALID(c) (cl[c].ph == HOLD && cl[c].vu > 0)
#define MUTEX (!(VALID(0) && VALID(1)) && !(VALID(0) && VALID(2)) && !(VALID(1) && VALID(2)))
#define BACKED(c) (!VALID(c) || (owner == (c) && ttl >= cl[c].vu))
/* a grant for a live ticket is pending: read (grantedToken) or unread */
#define GRANTPEND(c) ((cl[c].ph == ATT || cl[c].ph == WAIT) && \
                      (cl[c].gtok != 0 || GBHAS(c, cl[c].tok) || GBHAS(c, cl[c].pend)))
/* the owner holds nothing, has nothing on its way to Redis and no grant to use */
#define ORPHAN(c) (cl[c].ph != HOLD && cl[c].rqk == NONE && !cl[c].late && cl[c].wd == 0 && !cl[c].ab && \
                   !GRANTPEND(c))
/* a waiter has a wake-up coming (without counting its timer) */
#define WAKE(c) (cl[c].ph != WAIT || INQ(E(c, cl[c].tok)) || cl[c].gtok != 0 || GBHAS(c, cl[c].tok) || \
                 cl[c].wk || !cl[c].conn || owner == (c))

inline ghost() {
  if
  :: owner != NB && owner != FID && ORPHAN(owner) ->
     if
     :: orphanAge == NEVER -> orphanAge = 0
     :: else
     fi
  :: else -> orphanAge = NEVER
  fi
}

/* ---------------------------------------------------------------- queue */
inline qpush(x) {
  if
  :: qlen < QMAX -> q[qlen] = x; qlen++
  :: else -> queue_bound = false; assert(queue_bound)
  fi
}

/* LREM queue 1 x; sets `removed` */
inline qrem(x) {
  removed = false;
  idx = 0;
  do
  :: idx >= qlen -> break
  :: idx < qlen && q[idx] != x -> idx++
  :: idx < qlen && q[idx] == x ->
     removed = true;
     do
     :: idx + 1 < qlen -> q[idx] = q[idx + 1]; idx++
     :: else -> break
     od;
     qlen--;
     q[qlen] = 0;
     break
  od;
  idx = 0
}

/* PUBLISH to a client's grant channel */
inline gbpush(c, x) {
  if
  :: GB1(c) == 0 -> cl[c].gb = x
  :: GB1(c) != 0 && GB2(c) == 0 -> cl[c].gb = cl[c].gb | ((x) << 3)
  :: GB2(c) != 0 && GB3(c) == 0 -> cl[c].gb = cl[c].gb | ((x) << 6)
  :: else -> grant_buffer_bound = false; assert(grant_buffer_bound)
  fi
}

/* PUBLISH unlock-channel 0: reaches the connected clients; only a waiting one cares */
inline publishUnlock() {
  if :: fst == FWAIT -> fwk = true; fpass = 0 :: else fi;
  idx = 0;
  do
  :: idx < NC ->
     if
     :: cl[idx].conn && LIVE(idx) -> cl[idx].wk = true
     :: else
     fi;
     idx++
  :: else -> break
  od;
  idx = 0
}

/* ---------------------------------------------------------------- scripts */

/* include/hand-over.lua: the lock is being given up by its owner (or is gone) */
inline handOver() {
  found = false;
  do
  :: qlen == 0 -> break
  :: qlen > 0 ->
     ent = q[0]; q[0] = q[1]; q[1] = q[2]; q[2] = 0; qlen--;
     if
     :: cl[ent >> 3].conn && FTURN ->
        /* F listens (NUMSUB of the channel > of its presence twin) and had FH hand-overs go
           past it: the free is F's; the entry goes back to the head of the queue */
        q[2] = q[1]; q[1] = q[0]; q[0] = ent; qlen++;
        resv = RESV; fcnt = 0;
        printf("@ t=%d Redis: free left to F, reserved; %c stays first\n", clk, NAME(ent >> 3));
        break
     :: cl[ent >> 3].conn && !FTURN ->   /* NUMSUB grant channel > 0: PUBLISH */
        if
        :: fst == FWAIT ->
           fcnt++; fpass++;
           if :: fpass > FH -> foreign_bounded = false; assert(foreign_bounded) :: else fi
        :: else
        fi;
        gbpush(ent >> 3, ent & 7);
        owner = ent >> 3;
        ttl = L;
        found = true;
        printf("@ t=%d Redis: hand-over to %c (grant, token %d)\n", clk, NAME(owner), ent & 7);
        break
     :: !cl[ent >> 3].conn ->      /* nobody heard it: entry dropped */
        printf("@ t=%d Redis: hand-over skips %c (subscriber away)\n", clk, NAME(ent >> 3))
     fi
  od;
  if
  :: !found ->
     owner = NB; ttl = 0;
     printf("@ t=%d Redis: lock free, unlock published\n", clk);
     publishUnlock()
  :: else
  fi;
  ent = 0
}

/* lock/acquire.lua, expected = 0 (a client holds the lock at most once: hold count 0/1) */
inline acquireScript(c, waiter, queuedAs, record, rep, pt) {
  if
  :: owner == c ->                                   /* count = expected + 1 */
     ttl = L;
     if :: queuedAs != 0 -> qrem(E(c, queuedAs)) :: else fi;
     rep = TAKEN
  :: (owner != NB && owner != c) || (owner == NB && resv > 0 && fst == FWAIT) ->
                                                     /* held by another, or left to F */
#ifdef STALE_GRANT_BUG
     if                                              /* old: queuedAs trusted */
     :: waiter == 0 -> rep = HELD0                   /* no waiter given */
     :: queuedAs != 0 -> rep = HELD0
     :: else -> qpush(E(c, waiter)); rep = HELD1
     fi;
#else
     if                                              /* LPOS queuedAs, else RPUSH */
     :: waiter == 0 -> rep = HELD0                   /* no waiter given */
     :: queuedAs != 0 && INQ(E(c, queuedAs)) -> rep = HELD0
     :: else -> qpush(E(c, waiter)); rep = HELD1
     fi;
#endif
     pt = (owner == NB -> resv : ttl)
  :: owner == NB && !(resv > 0 && fst == FWAIT) ->   /* free */
     if
     :: record -> rep = CANCELLED                    /* request key exists */
     :: else ->
        owner = c; ttl = L;
        if :: queuedAs != 0 -> qrem(E(c, queuedAs)) :: else fi;
        rep = TAKEN
     fi
  fi;
  removed = false
}

/* lock/renew.lua */
inline renewScript(c, rep) {
  if
  :: owner == c -> ttl = L; rep = 1
  :: else -> rep = 0
  fi
}

/* lock/release.lua (count 1: the last hold frees the lock) */
inline releaseScript(c) {
  if
  :: owner == c -> handOver()
  :: else                                            /* nil: not the owner */
  fi
}

/* lock/withdraw.lua; rep = 1 when the lock was handed to c and is now passed on */
inline withdrawScript(c, tk, handed, rep) {
  qrem(E(c, tk));
  if
  :: !removed && handed && owner == c -> handOver(); rep = 1
  :: else -> rep = 0
  fi;
  removed = false
}

/* lock/cancel-acquire.lua: record the request as cancelled, unqueue, undo if applied */
inline cancelScript(c, a, b, copyOnWay) {
  if
  :: copyOnWay && cl[c].late -> cl[c].lcr = true
  :: else
  fi;
  if :: a != 0 -> qrem(E(c, a)) :: else fi;
  if :: b != 0 -> qrem(E(c, b)) :: else fi;
  removed = false;
  if
  :: owner == c -> handOver()                        /* count = expected + 1: undo */
  :: else
  fi
}

/* lock/abandon.lua */
inline abandonScript(c) {
  if
  :: owner == c -> handOver()
  :: else
  fi
}

/* ---------------------------------------------------------------- client helpers */

#define TOKUSED(c, x) (cl[c].tok == (x) || cl[c].pend == (x) || cl[c].gtok == (x) || HAS(cl[c].lm, x) || \
  HAS(cl[c].wd, x) || INQ(E(c, x)) || GBHAS(c, x) || (cl[c].late && (cl[c].lw == (x) || cl[c].lq == (x))) || \
  (cl[c].rqk != NONE && (cl[c].rqa == (x) || cl[c].rqb == (x))))

/* a fresh token: the smallest value that nothing refers to (same as a fresh id) */
inline newToken(c) {
  res = 1;
  do
  :: res <= TOKMAX && TOKUSED(c, res) -> res++
  :: res <= TOKMAX && !TOKUSED(c, res) -> break
  :: res > TOKMAX -> token_bound = false; assert(token_bound)
  od
}

inline send(c, kind, a, b, f) {
  cl[c].rqk = kind; cl[c].rqs = SENT; cl[c].rqa = a; cl[c].rqb = b; cl[c].rqf = f; cl[c].rqage = 0
}

inline clearSlot(c) {
  cl[c].rqk = NONE; cl[c].rqs = 0; cl[c].rqa = 0; cl[c].rqb = 0; cl[c].rqf = 0; cl[c].rqage = 0;
  rpl = 0; rpt = 0
}

inline clearTicket(c) {
  cl[c].tok = 0; cl[c].pend = 0; cl[c].gtok = 0; cl[c].sage = 0; cl[c].tmr = 0; cl[c].wk = false; cl[c].pre = 0
}

#define CHAINIDLE(c) (cl[c].rqk == NONE && cl[c].wd == 0 && !cl[c].ab)
/* Bound: an acquire goes out only while the queue has room and the client has fewer than
   3 unread grants, queue entries and late copies together (each grant needs an entry), so
   neither the queue nor the grant buffer can overflow. A client whose message reading lags
   further behind waits for it. */
#define CANSEND(c) (qlen < QMAX && GBN(c) + QN(c) + cl[c].late < 3)

/* a fresh grant (for the entry the latest HELD reply confirmed), with half of the lease that
   the hand-over set surely left: now < sentAt + L/2 */
#define TAKESGRANT(c) (cl[c].gtok != 0 && cl[c].gtok == cl[c].tok && cl[c].sage < HALF)

/* #attempt (src/engine/acquire.ts) */
inline attempt(c) {
  if
  :: TAKESGRANT(c) ->
     /* a fresh grant with half the lease left: take the lock without asking;
        validUntil = sentAt + L */
     cl[c].ph = HOLD; cl[c].vu = L - cl[c].sage;
     printf("@ t=%d %c: takes the lock on grant %d without asking (validUntil t=%d)\n",
            clk, NAME(c), cl[c].gtok, clk + cl[c].vu);
     clearTicket(c)
  :: else ->
     cl[c].gtok = 0;
#ifdef STALE_GRANT_BUG
     if                                    /* old: one token for the ticket's life */
     :: cl[c].tok != 0 -> res = cl[c].tok
     :: else -> newToken(c)
     fi;
#else
     newToken(c);                          /* fresh waiter per attempt */
#endif
     if :: !WAITS(c) -> res = 0 :: else fi;  /* a try without waiting queues nothing */
     cl[c].pend = res;
     cl[c].sage = 0;                          /* set again by the reply */
     send(c, ACQ, res, cl[c].tok, 0);
     cl[c].ph = INF;
     printf("@ t=%d %c: acquire(waiter %d, queuedAs %d) sent\n", clk, NAME(c), res, cl[c].tok);
     res = 0
  fi
}

/* The #attempt goes on the owner's chain (src/engine/chains.ts OperationChains): it runs at once when
   the chain is idle, else after the work queued so far (ATT). Work queued later waits for it. */
inline queueAttempt(c) {
  if
  :: CHAINIDLE(c) && (TAKESGRANT(c) || CANSEND(c)) -> attempt(c)
  :: else -> cl[c].ph = ATT; cl[c].pre = cl[c].wd | cl[c].ab;
     printf("@ t=%d %c: #attempt queued behind earlier requests\n", clk, NAME(c))
  fi
}

/* a caller that gave up: its ticket is left; queued -> withdraw on the chain */
inline leaveTicket(c) {
  cl[c].lm = cl[c].lm | BIT(cl[c].tok);
  cl[c].wd = cl[c].wd | BIT(cl[c].tok);
  clearTicket(c);
  cl[c].ph = IDLE
}

/* #attempt: the acquire reply. A reply is handled when it is executed: its effects on the
   client all count from the send time, so handling it later is the same as a stall; a reply
   that never comes is the LOST case. */
inline onAcquireReply(c) {
  assert(rpl != CANCELLED);          /* only late copies are ever refused */
  if
  :: rpl == TAKEN ->
     printf("@ t=%d %c: acquire reply TAKEN\n", clk, NAME(c));
     if
     :: cl[c].ph == INF ->                 /* validUntil from the request's send time */
        cl[c].ph = HOLD; cl[c].vu = L - cl[c].rqage;
        clearSlot(c)
     :: cl[c].ph == LINF ->                /* #granted after the caller left: release */
        cl[c].lm = cl[c].lm & ~(BIT(cl[c].tok) | BIT(cl[c].pend));
        cl[c].ph = IDLE;
        clearSlot(c);
        send(c, RELEASE, 0, 0, 0)
     fi;
     clearTicket(c)
  :: rpl == HELD0 || rpl == HELD1 ->
     printf("@ t=%d %c: acquire reply HELD pushed=%d pttl=%d\n",
            clk, NAME(c), rpl == HELD1, rpt);
     if
     :: rpl == HELD1 ->              /* the old token's grants are stale now */
        if :: cl[c].gtok == cl[c].tok -> cl[c].gtok = 0 :: else fi;
        if :: cl[c].ph == LINF -> cl[c].lm = cl[c].lm & ~BIT(cl[c].tok) :: else fi;
        cl[c].tok = cl[c].pend
     :: else ->
        if :: cl[c].ph == LINF -> cl[c].lm = cl[c].lm & ~BIT(cl[c].pend) :: else fi
     fi;
     cl[c].pend = 0;
     cl[c].sage = (cl[c].rqage < HALF -> cl[c].rqage : HALF);
     if
     :: cl[c].ph == LINF -> clearSlot(c); leaveTicket(c)
     :: !WAITS(c) -> clearSlot(c); clearTicket(c); cl[c].ph = IDLE   /* tryLock: null */
     :: else ->
        cl[c].tmr = rpt;
        clearSlot(c);
        cl[c].ph = WAIT
     fi
  fi

}

/* #renew: the reply (handled as it is executed, like the acquire reply) */
inline onRenewReply(c) {
  if
  :: cl[c].ph == HOLD && rpl == 1 ->
     if :: L - cl[c].rqage > cl[c].vu -> cl[c].vu = L - cl[c].rqage :: else fi
  :: cl[c].ph == HOLD && rpl == 0 ->    /* not the owner: lost */
     printf("@ t=%d %c: renew says not owner: lock lost\n", clk, NAME(c));
     cl[c].ph = IDLE; cl[c].vu = 0
  :: else                               /* given up for lost meanwhile */
  fi;
  clearSlot(c)
}

/* #attempt with no reply (timeout, lost request or reply) -> #cancelAcquire at once, the
   call fails, the ticket is left and cancelled; #withdraw in #acquire's finally */
inline timedOut(c, copyOnWay) {
  printf("@ t=%d %c: acquire timed out; cancel-acquire sent\n", clk, NAME(c));
  cl[c].lm = cl[c].lm | BIT(cl[c].tok) | BIT(cl[c].pend);
  cl[c].cm = cl[c].cm | BIT(cl[c].tok) | BIT(cl[c].pend);
  cl[c].wd = cl[c].wd | BIT(cl[c].tok);
  send(c, CANCEL, cl[c].tok, cl[c].pend, copyOnWay);
  clearTicket(c);
  cl[c].ph = IDLE;
  ghost()
}

/* ---------------------------------------------------------------- processes */
/* Every step is one d_step: an indivisible transition with no intermediate states (a script
   runs atomically in Redis; a client step is one turn of its event loop). Where a step has
   several outcomes (a reply delivered or lost, a timed-out request late or gone), each
   outcome is a step of its own. */

proctype Client(byte c) {
end:
  do
  /* Lock.acquire -> #acquire: a new call with a new ticket; its first #attempt */
  :: d_step { cl[c].ph == IDLE && cl[c].nacq < KOF(c) ->
       cl[c].nacq++;
       cl[c].sage = HALF;
       queueAttempt(c);
       ghost() }

  /* #attempt, once the chain work queued before it is done */
  :: d_step { cl[c].ph == ATT && cl[c].rqk == NONE && cl[c].pre == 0 && (TAKESGRANT(c) || CANSEND(c)) ->
       attempt(c);
       ghost() }

  /* #attempt: no reply (timeout, lost request or reply) -> #cancelAcquire at once,
     the call fails, the ticket is left and cancelled; #withdraw in #acquire's finally */
  :: d_step { cl[c].rqk == ACQ && cl[c].rqs == LOST ->       /* executed, reply lost */
       timedOut(c, false) }
  :: d_step { cl[c].rqk == ACQ && cl[c].rqs == SENT && nf < MAXF && !cl[c].late ->
       nf++;                                /* not executed yet: it may still be, later */
       cl[c].late = true; cl[c].lw = cl[c].rqa; cl[c].lq = cl[c].rqb; cl[c].lcr = false;
       timedOut(c, true) }
  :: d_step { cl[c].rqk == ACQ && cl[c].rqs == SENT && nf < MAXF ->
       nf++;                                /* not executed, and never will be */
       timedOut(c, false) }

  /* #acquire wait loop: a grant, an unlock message, a reconnect or the timer wakes it */
  :: d_step { cl[c].ph == WAIT && (cl[c].gtok != 0 || cl[c].wk || cl[c].tmr == 0) ->
       printf("@ t=%d %c: wakes (%d grant, %d unlock/reconnect, %d timer)\n",
              clk, NAME(c), cl[c].gtok != 0, cl[c].wk, cl[c].tmr == 0);
       cl[c].wk = false; cl[c].tmr = 0;
       queueAttempt(c);
       ghost() }

  /* abort or deadline: the call ends at once, the ticket is left */
  :: d_step { (cl[c].ph == ATT || cl[c].ph == INF || cl[c].ph == WAIT) && ng < MAXG ->
       ng++;
       printf("@ t=%d %c: gives up waiting\n", clk, NAME(c));
       if
       :: cl[c].ph == INF ->                    /* the attempt in flight finishes later */
          cl[c].lm = cl[c].lm | BIT(cl[c].tok) | BIT(cl[c].pend);
          cl[c].wk = false;
          cl[c].ph = LINF
       :: else -> leaveTicket(c)
       fi;
       ghost() }

  /* #onGrant: a grant message is read */
  :: d_step { cl[c].gb != 0 ->
       tkn = GB1(c); cl[c].gb = cl[c].gb >> 3;
       if
       :: LIVE(c) && (tkn == cl[c].tok || tkn == cl[c].pend) -> cl[c].gtok = tkn;
          printf("@ t=%d %c: reads grant %d (live ticket)\n", clk, NAME(c), tkn)
       :: else ->
          if
          :: HAS(cl[c].lm, tkn) -> cl[c].wd = cl[c].wd | BIT(tkn);
             printf("@ t=%d %c: reads grant %d (left ticket: withdraw)\n", clk, NAME(c), tkn)
          :: else ->
             printf("@ t=%d %c: reads grant %d (ignored)\n", clk, NAME(c), tkn)
          fi
       fi;
       tkn = 0;
       ghost() }

  /* chain work: #expire's abandon */
  :: d_step { cl[c].rqk == NONE && cl[c].ab && (cl[c].ph != ATT || (cl[c].pre & 1)) ->
       cl[c].ab = false; cl[c].pre = cl[c].pre & ~1;
       send(c, ABANDON, 0, 0, 0);
       printf("@ t=%d %c: abandon sent\n", clk, NAME(c));
       ghost() }

  /* chain work: #withdraw (handed: this owner holds nothing locally) */
  :: d_step { cl[c].rqk == NONE && (cl[c].ph == ATT -> (cl[c].wd & cl[c].pre) : cl[c].wd) != 0 ->
       tkn = 1;
       do
       :: HAS((cl[c].ph == ATT -> (cl[c].wd & cl[c].pre) : cl[c].wd), tkn) -> break
       :: else -> tkn++
       od;
       cl[c].wd = cl[c].wd & ~BIT(tkn); cl[c].pre = cl[c].pre & ~BIT(tkn);
#ifdef STALE_WITHDRAW_BUG
       /* old: handed whenever the owner holds nothing locally */
       found = cl[c].ph != HOLD;
#else
       /* handed only when the owner holds nothing and no other acquire of it is under way
          (#acquiring); such an acquire is woken instead, to ask Redis (wakeOthers) */
       found = cl[c].ph != HOLD && !LIVE(c);
       if :: cl[c].ph == WAIT -> cl[c].wk = true :: else fi;
#endif
       send(c, WITHDRAW, tkn, 0, found);
       printf("@ t=%d %c: withdraw(token %d, handed %d) sent\n", clk, NAME(c), tkn, found);
       found = false;
       tkn = 0;
       ghost() }

  /* Watchdog: renew, at most once per tick after the last confirmed lease start */
  :: d_step { cl[c].ph == HOLD && cl[c].rqk == NONE && cl[c].vu < RENEW_AT ->
       send(c, RENEW, 0, 0, 0);
       ghost() }

  /* Lease.release -> #release: stops believing it holds when the request goes out */
  :: d_step { cl[c].ph == HOLD && cl[c].rqk == NONE && cl[c].wd == 0 && !cl[c].ab ->
       cl[c].ph = IDLE; cl[c].vu = 0;
       send(c, RELEASE, 0, 0, 0);
       printf("@ t=%d %c: release sent\n", clk, NAME(c));
       ghost() }

  /* Watchdog -> #expire: no renewal confirmed within the lease: lost, abandon queued */
  :: d_step { cl[c].ph == HOLD && cl[c].vu == 0 ->
       cl[c].ph = IDLE; cl[c].vu = 0; cl[c].ab = true;
       printf("@ t=%d %c: lease ran out locally: lock lost\n", clk, NAME(c));
       ghost() }

  /* subscriber connection drops: unread messages are lost. Only taken when it can matter:
     a live or left ticket, or unread grants (otherwise a drop and reconnect change nothing) */
  :: d_step { cl[c].conn && nd < MAXD && (LIVE(c) || cl[c].ph == LINF || cl[c].gb != 0 || cl[c].lm != 0) ->
       nd++; cl[c].conn = false; cl[c].gb = 0; cl[c].wk = false;
       printf("@ t=%d %c: subscriber disconnected\n", clk, NAME(c));
       ghost() }

  /* ...and comes back: every waiter of the client wakes */
  :: d_step { !cl[c].conn ->
       cl[c].conn = true;
       if :: LIVE(c) -> cl[c].wk = true :: else fi;
       printf("@ t=%d %c: subscriber reconnected\n", clk, NAME(c));
       ghost() }
  od
}

/* The client's connection to Redis: executes its requests, loses some. */
proctype Net(byte c) {
end:
  do
  /* a request is executed, and its reply delivered */
  :: d_step { cl[c].rqs == SENT && cl[c].rqk == ACQ ->
       acquireScript(c, cl[c].rqa, cl[c].rqb, false, rpl, rpt);
       printf("@ t=%d Redis: acquire(%c, waiter %d, queuedAs %d) -> %d\n",
              clk, NAME(c), cl[c].rqa, cl[c].rqb, rpl);
       onAcquireReply(c);
       ghost() }
  :: d_step { cl[c].rqs == SENT && cl[c].rqk == RENEW ->
       renewScript(c, rpl);
       onRenewReply(c);
       ghost() }
  :: d_step { cl[c].rqs == SENT && cl[c].rqk == RELEASE ->
       printf("@ t=%d Redis: release(%c)\n", clk, NAME(c));
       releaseScript(c); clearSlot(c);
       ghost() }
  :: d_step { cl[c].rqs == SENT && cl[c].rqk == WITHDRAW ->
       withdrawScript(c, cl[c].rqa, cl[c].rqf, res);
       printf("@ t=%d Redis: withdraw(%c, token %d, handed %d) -> %d\n",
              clk, NAME(c), cl[c].rqa, cl[c].rqf, res);
       if                                   /* the reply: forget the left ticket... */
       :: !HAS(cl[c].cm, cl[c].rqa) -> cl[c].lm = cl[c].lm & ~BIT(cl[c].rqa)
       :: else                              /* ...unless it was cancelled */
       fi;
       res = 0;
       clearSlot(c);
       ghost() }
  :: d_step { cl[c].rqs == SENT && cl[c].rqk == CANCEL ->
       printf("@ t=%d Redis: cancel-acquire(%c, tokens %d %d)\n", clk, NAME(c), cl[c].rqa, cl[c].rqb);
       cancelScript(c, cl[c].rqa, cl[c].rqb, cl[c].rqf); clearSlot(c);
       ghost() }
  :: d_step { cl[c].rqs == SENT && cl[c].rqk == ABANDON ->
       printf("@ t=%d Redis: abandon(%c)\n", clk, NAME(c));
       abandonScript(c); clearSlot(c);
       ghost() }

  /* ...or executed with its reply lost */
  :: d_step { cl[c].rqs == SENT && cl[c].rqk == ACQ && nf < MAXF ->
       acquireScript(c, cl[c].rqa, cl[c].rqb, false, rpl, rpt);
       printf("@ t=%d Redis: acquire(%c, waiter %d, queuedAs %d) -> %d, reply lost\n",
              clk, NAME(c), cl[c].rqa, cl[c].rqb, rpl);
       nf++; cl[c].rqs = LOST;              /* the client will time out */
       rpl = 0; rpt = 0;
       ghost() }
  :: d_step { cl[c].rqs == SENT && cl[c].rqk == RENEW && nf < MAXF ->
       renewScript(c, rpl);
       nf++; clearSlot(c);                  /* no renewal confirmed */
       ghost() }
  :: d_step { cl[c].rqs == SENT && cl[c].rqk == WITHDRAW && nf < MAXF && !HAS(cl[c].cm, cl[c].rqa) ->
       withdrawScript(c, cl[c].rqa, cl[c].rqf, res);
       nf++;                                /* no reply: the left ticket stays remembered */
       res = 0;
       clearSlot(c);
       ghost() }

  /* a request other than acquire is lost (acquire: see the client's timeout) */
  :: d_step { cl[c].rqs == SENT && cl[c].rqk != ACQ && nf < MAXF ->
       nf++;
       clearSlot(c);
       ghost() }

  /* a late copy of a given-up acquire request arrives */
  :: d_step { cl[c].late ->
       acquireScript(c, cl[c].lw, cl[c].lq, cl[c].lcr, res, tkn);
       printf("@ t=%d Redis: late acquire copy (%c, waiter %d) -> %d\n", clk, NAME(c), cl[c].lw, res);
       cl[c].late = false; cl[c].lw = 0; cl[c].lq = 0; cl[c].lcr = false; res = 0; tkn = 0;
       ghost() }

  /* ...or never does */
  :: d_step { cl[c].late ->
       cl[c].late = false; cl[c].lw = 0; cl[c].lq = 0; cl[c].lcr = false;
       ghost() }
  od
}

/* F, a client of Redisson's RLock protocol: it subscribes, tries (RedissonLock.tryLockInnerAsync:
   take the lock if no one holds it), and tries again on each `0` it hears or when the holder's
   lease runs out; once it has the lock it unsubscribes, and it releases by Redisson's script.
   It may stall for any time, like every process. */
proctype Foreign() {
end:
  do
  :: d_step { fst == FIDLE && fr < KF -> fst = FWAIT; fwk = false; fpass = 0;
       printf("@ t=%d F: subscribes and waits\n", clk) }
  :: d_step { fst == FWAIT && (fwk || owner == NB) ->
       fwk = false;
       if
       :: owner == NB -> owner = FID; ttl = L; fst = FHOLD; fpass = 0;
          printf("@ t=%d F: takes the lock (Redisson's script)\n", clk)
       :: else -> printf("@ t=%d F: tries, held\n", clk)
       fi;
       ghost() }
  :: d_step { fst == FHOLD ->
       owner = NB; ttl = 0; fr++;
       fst = (fr < KF -> FIDLE : FDONE);
       printf("@ t=%d F: releases (DEL + PUBLISH 0)\n", clk);
       publishUnlock();
       ghost() }
  od
}

/* Time passes; any process may lag behind it (stall). Expiry is lazy in Redis; doing it
   here at once changes nothing any script or property can see. */
active proctype Clock() {
end:
  do
  :: d_step {
       clk++;
       if :: resv > 0 -> resv-- :: else fi;   /* the reservation's PX */
       if                                   /* lazy expiry: gone when now >= expireAt */
       :: owner == FID                      /* F's watchdog renews it while F holds */
       :: owner != NB && owner != FID ->
          ttl--;
          if
          :: ttl == 0 ->
             printf("@ t=%d Redis: lock of %c expired\n", clk, NAME(owner));
             owner = NB;
             skip
          :: else
          fi
       :: else
       fi;
       idx = 0;
       do
       :: idx < NC ->
          if :: cl[idx].vu > 0 -> cl[idx].vu-- :: else fi;
          if :: cl[idx].tmr > 0 -> cl[idx].tmr-- :: else fi;
          if :: (cl[idx].ph == ATT || cl[idx].ph == WAIT) && cl[idx].sage < HALF -> cl[idx].sage++ :: else fi;
          if :: (cl[idx].rqk == ACQ || cl[idx].rqk == RENEW) && cl[idx].rqage < L -> cl[idx].rqage++ :: else fi;
          idx++
       :: else -> break
       od;
       idx = 0;
       if :: orphanAge != NEVER && orphanAge <= L -> orphanAge++ :: else fi;
       ghost() }
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
  :: d_step { orphanAge != NEVER && orphanAge > L -> no_stuck_lock = false; assert(no_stuck_lock) }
#endif
#ifndef NO_WAKEUP
  :: d_step { !(WAKE(0) && WAKE(1) && WAKE(2)) -> no_lost_wakeup = false; assert(no_lost_wakeup) }
#endif
#ifdef FOREIGN
  :: d_step { fst == FHOLD && owner != FID -> mutual_exclusion = false; assert(mutual_exclusion) }
#endif
  od
}

init {
  atomic {
    cl[0].conn = 1; cl[1].conn = 1; cl[2].conn = 1;
    run Client(2); run Client(1); run Client(0);
    run Net(0); run Net(1); run Net(2);
#ifdef FOREIGN
    run Foreign();
#else
    fst = FDONE;
#endif
  }
}
