/*
 * lease.pml: the objlease lease protocol and the in-place fence, for SPIN.
 *
 * README.md (next to this file) maps every step to the function it stands
 * for and argues the time abstraction; RESULTS.md has the numbers.
 *
 * Configuration (spin -D...):
 *   N=2|3            clients
 *   MAXTOK=k         tokens issued at most (bounds the run, see README)
 *   DATA             clients also write one fenced data object
 *   BREAKS=k         Break calls allowed in a run (default 1)
 *   OPERATOR         an operator deletes the lease record by hand, once
 *   TWINS            clients 0 and 1 share one holder name
 *   STORECLOCK       the opt-in store-clock takeover rule
 *   LIVE             liveness run: client 0 acquires and dies, the others
 *                    only acquire, faults are finite
 * Properties (one per run, each an assertion at the step where it can break):
 *   P_EXCL           at every instant at most one client believes it holds
 *   P_TOKEN          the record's token never goes back, no token is
 *                    granted twice
 *   P_FENCE          the data object never accepts a lower token
 *   P_RELEASE        a release never ends another holder's tenure
 * Safeguards off (mirror internal/safeguards):
 *   NO_DRIFT_MARGIN, NO_KEEP_RECORD, NO_NONCE_CHECK, NO_UNIQUE_NONCES,
 *   NO_OWN_WRITE_CHECK, NO_UNIQUE_TOMBSTONES, NO_CALLBACK_BEFORE_RELEASE
 */

#ifndef N
#define N 2
#endif
#ifndef MAXTOK
#define MAXTOK 3
#endif
#ifndef BREAKS
#define BREAKS 1
#endif
#if defined(LIVE) && !defined(FAULTS)
#define FAULTS 2 /* faults the store may still inject (unbounded if undefined) */
#endif

/* Time: drift bound b = 1/3; a local duration d measures a real interval
 * in [d/(1+b), d/(1-b)]. Bounds in ticks of real time (see README). */
#ifdef NO_DRIFT_MARGIN
#define TTL 4
#define HLO 3 /* holder: a bare TTL from the reply: [4/(4/3), 4/(2/3)] */
#define HHI 6
#define CLO 3 /* contender: a bare TTL */
#define CHI 6
#else
#define TTL 2
#define HLO 1 /* holder: TTL*(1-b) = 4/3 local from the send: [1, 2] */
#define HHI 2
#define CLO 2 /* contender: TTL*(1+b) = 8/3 local: [2, 4] */
#define CHI 4
#endif

/* scratch variables are kept out of the state vector (not with -DNOHIDE,
 * which breadth-first search needs) */
#ifdef NOHIDE
#define HIDDEN
#else
#define HIDDEN hidden
#endif

/* record states */
#define ABSENT 0
#define HELD 1
#define RELEASED 2

/* write ops */
#define CREATE 1
#define REPLACE 2
#define DELETE 3

/* request slot states and replies */
#define INFLIGHT 1
#define LANDED 2
#define REFUSED 3
#define TIMEDOUT 5
#define OK 1
#define PRE 2
#define UNK 3
#define AMB 5
#define BAD 6

#define MAXID 14
#define EMPTY 15 /* the data object's version of an empty tombstone (MD5 of nothing) */

/* ---- the store: the lease record ---- */
byte rver; /* version, 0 = absent */
byte rtok;
byte rst;
byte rhold; /* holder name, 0 = none */
byte rnon;  /* nonce */
byte rby;   /* ghost: client that wrote it, 1-based; 0 = none/operator */
#ifdef STORECLOCK
byte rage; /* real ticks since the record was last written (store clock) */
#endif

/* ---- the store: the fenced data object ---- */
#ifdef DATA
byte dver; /* 0 = absent */
byte dtok;
byte dmax; /* ghost: highest token the object accepted */
#endif

/* ---- clients ---- */
byte name[N]; /* holder name */
byte highest[N];
/* view: what the client last read */
bit vknown[N];
bit vmine[N];
byte vver[N];
byte vtok[N];
byte vst[N];
byte cel[N]; /* real ticks since the view's version was first seen */
bit vpre[N]; /* first seen before this client's validity ran out */
#ifdef STORECLOCK
bit vold[N]; /* the store's clock said the version was older than TTL when read */
#endif
/* the lease */
bit hold[N]; /* lease not ended */
bit bel[N];  /* context not cancelled: believes it holds */
bit vend[N]; /* its validity has run out on its own clock (during a release) */
bit relg[N]; /* a release is in progress */
bit busy[N]; /* a renewal or release is in progress */
byte hel[N]; /* real ticks since the send of the last confirmed write */
byte ltok[N];
byte lver[N];
byte lnon[N];
byte lun0[N]; /* unsure: nonces of unconfirmed renewals (two kept) */
byte lun1[N];
byte ftok[N]; /* token this client stamps fenced writes with */
/* the write in progress */
byte wnon[N];
byte wifv[N];
byte wrv[N]; /* the version its write produced */
byte sel[N]; /* real ticks since it was sent */
/* request slots: cur (awaited) and late (given up on, may still land) */
byte pst[N];
byte pres[N]; /* version it produced, once landed */
byte qst[N];
byte qop[N];
byte qifv[N];
byte qtok[N];
byte qstate[N];
byte qnon[N];
bit qhl[N];
#ifdef DATA
byte fver[N]; /* data version its stat saw */
#endif
#ifdef NO_UNIQUE_NONCES
byte lastnon[N];
#endif

/* ---- ghosts for the properties ---- */
byte epoch;    /* operator deletions so far */
byte bep[N];   /* epoch in which each lease began */
byte lep[N];   /* epoch in which its last write landed */
int granted;   /* tokens granted in this epoch (a bit each) */
byte gmax;     /* highest token the record carried in this epoch */
byte broke;    /* holds with tokens up to this were broken (exempt) */
byte breaks;
#ifdef FAULTS
byte faults;
#endif

/* ---- identifiers: the lowest one nothing refers to ---- */
HIDDEN int used;
HIDDEN byte fid;
#define MARK(x) used = used | (1 << (x))
inline freshid() {
	used = 1;
	MARK(rver); MARK(rnon);
	fid = 0;
	do
	:: fid < N ->
		MARK(vver[fid]); MARK(lver[fid]); MARK(lnon[fid]); MARK(lun0[fid]); MARK(lun1[fid]);
		MARK(wnon[fid]); MARK(wifv[fid]); MARK(pres[fid]);
		MARK(qifv[fid]); MARK(qnon[fid]); MARK(wrv[fid]);
#ifdef NO_UNIQUE_NONCES
		MARK(lastnon[fid]);
#endif
		fid++
	:: else -> break
	od;
	fid = 1;
	do
	:: fid <= MAXID && (used & (1 << fid)) -> fid++
	:: else -> break
	od;
	assert(fid <= MAXID)
}
#ifdef DATA
HIDDEN byte did;
inline freshdata() {
	used = 1;
	MARK(dver);
	did = 0;
	do
	:: did < N -> MARK(fver[did]); did++
	:: else -> break
	od;
	did = 1;
	do
	:: did <= MAXID && (used & (1 << did)) -> did++
	:: else -> break
	od;
	assert(did <= MAXID)
}
#endif


/* Identifiers are compared only for equality, so a state is stored with
 * them renamed in order of first occurrence (a canonical form). */
HIDDEN byte cmap[MAXID + 1];
HIDDEN byte cnext;
HIDDEN byte cj;
#define REL(x) if :: x != 0 && x <= MAXID -> if :: cmap[x] == 0 -> cnext++; cmap[x] = cnext :: else -> skip fi; x = cmap[x] :: else -> skip fi
#ifdef NO_UNIQUE_NONCES
#define RELNON(j) REL(lastnon[j])
#else
#define RELNON(j) skip
#endif
inline canon() {
	cnext = 0;
	REL(rver); REL(rnon);
	cj = 0;
	do
	:: cj < N ->
		REL(lver[cj]); REL(lnon[cj]); REL(lun0[cj]); REL(lun1[cj]); REL(vver[cj]);
		REL(wnon[cj]); REL(wifv[cj]); REL(wrv[cj]); REL(pres[cj]);
		REL(qifv[cj]); REL(qnon[cj]); RELNON(cj);
		cj++
	:: else -> break
	od;
	cj = 0;
	do
	:: cj <= MAXID -> cmap[cj] = 0; cj++
	:: else -> break
	od;
#ifdef DATA
	cnext = 0;
	REL(dver);
	cj = 0;
	do
	:: cj < N -> REL(fver[cj]); cj++
	:: else -> break
	od;
	cj = 0;
	do
	:: cj <= MAXID -> cmap[cj] = 0; cj++
	:: else -> break
	od;
#endif
	cj = 0; cnext = 0
}

/* ---- reads (Client.read) ---- */
/* Atomic read of the record into i's view; out = BAD for a token below
 * the highest seen (ErrBadRecord). The count restarts on a new version. */
inline readrec(i, out) {
	if
	:: rst != ABSENT && rtok < highest[i] -> out = BAD
	:: else ->
		out = OK;
		if
		:: vknown[i] && vver[i] == rver -> skip
		:: else -> cel[i] = 0; vmine[i] = 0; vpre[i] = relg[i] && !vend[i]
		fi;
		vknown[i] = 1; vver[i] = rver; vtok[i] = rtok; vst[i] = rst;
#ifdef STORECLOCK
		vold[i] = (rst != ABSENT && rage >= TTL);
#endif
		if
		:: rst != ABSENT -> highest[i] = rtok
		:: else -> skip
		fi
	fi
}


/* ---- writes: send, reply (putTracked) ---- */

#define CLEARQ(j) qst[j] = 0; qop[j] = 0; qifv[j] = 0; qtok[j] = 0; qstate[j] = 0; qnon[j] = 0; qhl[j] = 0
/* a request given up on lands late, or never */
#define LATE(j) atomic { qst[j] == INFLIGHT -> \
		if \
		:: apply(j, qop[j], qifv[j], qtok[j], qstate[j], qnon[j], qhl[j]); \
			printf("STEP c%d late-write-lands=%d\n", j, cond) \
		:: printf("STEP c%d late-write-dropped\n", j) \
		fi; \
		CLEARQ(j); canon() }

/* The store applies a conditional write; the ghost checks sit here. */
HIDDEN byte cond;
inline apply(i, op, ifv, tok, state, non, hl) {
	if
	:: op == CREATE -> cond = (rst == ABSENT)
	:: else -> cond = (rst != ABSENT && rver == ifv)
	fi;
	if
	:: cond ->
#ifdef P_TOKEN
		assert(op == DELETE || tok >= gmax);
#endif
#ifdef P_RELEASE
		if
		:: op == DELETE || (state == RELEASED && hl) -> /* a release */
			assert(rst != HELD || rby == i + 1)
		:: else -> skip
		fi;
#endif
		if
		:: op != DELETE && state == RELEASED && !hl && tok - 1 > broke ->
			broke = tok - 1 /* a break: holds up to the old token are over */
		:: else -> skip
		fi;
		if
		:: op == DELETE ->
			rver = 0; rtok = 0; rst = ABSENT; rhold = 0; rnon = 0; rby = 0
		:: else ->
			rtok = tok; rst = state; rnon = non; rby = i + 1;
			rhold = (hl -> name[i] : 0);
			if
			:: tok > gmax -> gmax = tok
			:: else -> skip
			fi;
#ifdef NO_UNIQUE_NONCES
			freshid(); rver = fid
#else
			rver = non /* nonces are unique per write: the version can be the nonce */
#endif
		fi;
#ifdef STORECLOCK
		rage = 0;
#endif
		skip
	:: else -> skip
	fi
}

#ifdef FAULTS
#define FAULT (faults > 0)
#define SPEND faults--
#else
#define FAULT true
#define SPEND skip
#endif

/* A request reaches the store as it is sent (applied or refused), or it is
 * held up: its caller times out, and it may land late, or never. A request
 * still held up when the next is sent is dropped (it never lands). */
inline sendw(i, op, ifv, tok, state, non, hl) {
	printf("STEP c%d sends op=%d token=%d state=%d holder=%d attempt=%d\n", i, op, tok, state, hl, att);
	if
	:: apply(i, op, ifv, tok, state, non, hl); printf("STEP c%d write-lands=%d\n", i, cond);
		lep[i] = epoch;
		pst[i] = (cond -> LANDED : REFUSED); pres[i] = (cond -> rver : 0)
	:: FAULT -> SPEND; printf("STEP c%d write-held-up\n", i);
		qst[i] = INFLIGHT; qop[i] = op; qifv[i] = ifv; qtok[i] = tok;
		qstate[i] = state; qnon[i] = non; qhl[i] = hl;
		pst[i] = TIMEDOUT
	fi;
	cond = 0
}

/* Client.nonce */
inline nonce(i) {
	freshid(); wnon[i] = fid;
#ifdef NO_UNIQUE_NONCES
	/* Options.Rand alone: a twin seeded alike draws the same nonces */
	if
	:: lastnon[1 - i] != 0 && i < 2 -> wnon[i] = lastnon[1 - i]
	:: true -> skip
	fi;
	lastnon[i] = wnon[i];
#endif
	skip
}

/* The reply of putTracked's attempt att, and (for an unknown outcome) the
 * re-read that resolves it: res = OK (wrv: the version), PRE, UNK, AMB or
 * BAD, or 0 to try again; unc: an attempt's outcome was unknown. */
inline reply(i, op, tok, state) {
	if
	:: pst[i] == LANDED -> out = OK; wrv[i] = pres[i]; printf("STEP c%d reply ok\n", i)
	:: pst[i] == REFUSED -> out = PRE; printf("STEP c%d reply precondition\n", i)
	:: pst[i] == TIMEDOUT -> out = UNK; printf("STEP c%d reply unknown (timed out)\n", i)
	fi;
	pst[i] = 0; pres[i] = 0; res = 0;
	if
	:: out == OK ->
		res = OK;
		vknown[i] = 1; vmine[i] = 1; vver[i] = wrv[i]; vtok[i] = tok; vst[i] = state; cel[i] = 0;
		vpre[i] = relg[i] && !vend[i];
		if
		:: tok > highest[i] -> highest[i] = tok
		:: else -> skip
		fi
	:: out == PRE && att == 1 -> res = PRE
	:: else ->
		unc = unc || out == UNK;
#ifdef NO_NONCE_CHECK
		res = OK; wrv[i] = 0; lep[i] = epoch /* assumed landed; the version stays unknown ("") */
#else
		if
		:: true ->
			readrec(i, o);
			printf("STEP c%d resolve-reads token=%d state=%d\n", i, rtok, rst);
			if
			:: o == BAD -> res = BAD
			:: o != BAD && rst != ABSENT && rnon == wnon[i] &&
#ifdef NO_OWN_WRITE_CHECK
				true ->
#else
				rhold == name[i] ->
#endif
				res = OK; wrv[i] = rver; lep[i] = epoch
			:: o != BAD && ((op == CREATE && rst == ABSENT) || (op != CREATE && rst != ABSENT && rver == wifv[i])) ->
				res = (att >= 3 -> out : 0) /* unchanged: not landed yet; try again */
			:: else -> res = PRE
			fi
		:: FAULT -> SPEND; res = AMB; /* re-reads fail until the context ends */
			printf("STEP c%d resolve-gives-up (ambiguous)\n", i)
		fi;
		o = 0
#endif
	fi
}

/* putTracked, with DONE run in the same step as the final reply */
#define PUT(i, op, tok, state, hl, DONE) \
	att = 1; \
	do \
	:: atomic { sendw(i, op, wifv[i], tok, state, wnon[i], hl); canon() }; \
		atomic { reply(i, op, tok, state); \
			if \
			:: res != 0 -> DONE \
			:: else -> skip \
			fi; \
			canon() }; \
		if \
		:: res != 0 -> break \
		:: else -> att++ \
		fi \
	od; \
	att = 0; out = 0

/* a lease begins (Client.newLease): the exclusion and grant checks */
HIDDEN byte oj;
inline onset(i, tok) {
#ifdef P_EXCL
	/* A lease whose validity already ran out while its reply was on the
	 * way begins ended: it is not believed. */
	if
#ifdef NO_DRIFT_MARGIN
	:: tok > broke ->
#else
	:: sel[i] < HHI && tok > broke ->
#endif
		oj = 0;
		do
		:: oj < N ->
			assert(oj == i || !bel[oj] || bep[oj] != epoch || ltok[oj] <= broke || hel[oj] >= HHI);
			oj++
		:: else -> break
		od;
		oj = 0
	:: else -> skip
	fi;
#endif
	if
	:: lep[i] == epoch ->
#ifdef P_TOKEN
		assert((granted & (1 << tok)) == 0); /* no token is granted twice */
#endif
		granted = granted | (1 << tok)
	:: else -> skip /* it landed before the operator deleted the record */
	fi;
	printf("STEP c%d holds token=%d\n", i, tok);
	hold[i] = 1; bel[i] = 1; vend[i] = 0; ltok[i] = tok; lver[i] = wrv[i]; lnon[i] = wnon[i];
	lun0[i] = 0; lun1[i] = 0; bep[i] = lep[i]; lep[i] = 0;
#ifdef DATA
	ftok[i] = tok;
#endif
#ifdef NO_DRIFT_MARGIN
	hel[i] = 0 /* counted from the reply */
#else
	hel[i] = sel[i] /* counted from the send */
#endif
}

inline endlease(i) {
	hold[i] = 0; bel[i] = 0; hel[i] = 0; ltok[i] = 0; lver[i] = 0; lnon[i] = 0;
	lun0[i] = 0; lun1[i] = 0; bep[i] = 0; vend[i] = 0; relg[i] = 0; busy[i] = 0
}

/* ownWrite: a held record carrying one of this lease's own writes */
#ifdef NO_OWN_WRITE_CHECK
#define OWN(i) (rst == HELD && rtok == ltok[i])
#else
#define OWN(i) (rst == HELD && rtok == ltok[i] && rhold == name[i] && \
	(rnon == lnon[i] || rnon == lun0[i] && lun0[i] != 0 || rnon == lun1[i] && lun1[i] != 0))
#endif

/* Client.TryAcquire (one attempt: a caller calls it again to retry) */
#define ACQ_DONE \
	if \
	:: res == OK -> onset(i, tok) \
	:: res == PRE && wifv[i] == 0 -> readrec(i, o); o = 0 \
	:: else -> skip \
	fi
inline tryAcquire(i) {
	atomic {
		!hold[i];
		if
		:: !vknown[i] || vst[i] == ABSENT -> skip /* create without a read */
		:: vknown[i] && vmine[i] && vst[i] == RELEASED -> skip /* take back without a read */
		:: else -> readrec(i, o); printf("STEP c%d acquire-reads token=%d state=%d\n", i, rtok, rst)
		fi;
		if
		:: o == BAD -> tok = 0
		:: o != BAD && vknown[i] && vst[i] == HELD ->
			if
			:: cel[i] >= CLO -> tok = vtok[i] + 1 /* seen unchanged long enough */
#ifdef STORECLOCK
			:: vold[i] -> tok = vtok[i] + 1 /* the store's clock says it is older than its TTL */
#endif
			:: cel[i] < CHI -> tok = 0 /* held (HeldError) */
			fi
		:: o != BAD && vknown[i] && vst[i] == RELEASED -> tok = vtok[i] + 1
		:: else -> tok = highest[i] + 1 /* absent or never seen: create */
		fi;
		o = 0;
		if
		:: tok > MAXTOK -> tok = 0
		:: else -> skip
		fi;
		if
		:: tok != 0 ->
			nonce(i);
			wifv[i] = (vknown[i] && vst[i] != ABSENT -> vver[i] : 0);
			sel[i] = 0
		:: else -> skip
		fi;
		canon()
	};
	if
	:: tok != 0 -> PUT(i, (wifv[i] == 0 -> CREATE : REPLACE), tok, HELD, 1, ACQ_DONE)
	:: else -> skip
	fi;
	atomic { tok = 0; res = 0; unc = 0; wnon[i] = 0; wifv[i] = 0; wrv[i] = 0; sel[i] = 0; canon() }
}

/* Lease.renew */
#define RENEW_END \
	if \
	:: res == PRE -> endlease(i); printf("STEP c%d renewal refused: lost\n", i) \
	:: res == OK && hold[i] -> \
		printf("STEP c%d renewed\n", i); \
		lver[i] = wrv[i]; lnon[i] = wnon[i]; lun0[i] = 0; lun1[i] = 0; \
		hel[i] = RENEWED_FROM \
	:: else -> skip \
	fi
#ifdef NO_DRIFT_MARGIN
#define RENEWED_FROM 0
#else
#define RENEWED_FROM sel[i]
#endif
#ifdef NO_OWN_WRITE_CHECK
#define RENEW_DONE RENEW_END
#else
/* a refusal: lateOwnWrite re-reads, and renews over a late own write */
#define RENEW_DONE \
	if \
	:: res == PRE -> \
		readrec(i, o); \
		if \
		:: o != BAD && OWN(i) -> wifv[i] = rver; sel[i] = 0; again = 1 \
		:: else -> RENEW_END \
		fi; \
		o = 0 \
	:: else -> RENEW_END \
	fi
#endif
inline renew(i) {
	atomic {
		hold[i]; /* l.ended: nothing to renew */
		busy[i] = 1; tok = ltok[i];
		nonce(i);
		lun1[i] = lun0[i]; lun0[i] = wnon[i]; /* unsure until confirmed (the oldest of three is forgotten) */
		wifv[i] = lver[i]; sel[i] = 0; canon()
	};
	PUT(i, (wifv[i] == 0 -> CREATE : REPLACE), tok, HELD, 1, RENEW_DONE);
	if
	:: again -> PUT(i, REPLACE, tok, HELD, 1, RENEW_END)
	:: else -> skip
	fi;
	atomic {
		busy[i] = 0;
		if
		:: !hold[i] -> endlease(i) /* it ended meanwhile */
		:: else -> skip
		fi;
		again = 0; tok = 0; res = 0; unc = 0; wnon[i] = 0; wifv[i] = 0; wrv[i] = 0; sel[i] = 0; canon() }
}

/* Lease.Release */
#define REL_END \
	if \
	:: res == PRE && unc -> \
		if \
		:: o != BAD && vst[i] != ABSENT && vtok[i] > ltok[i] && vpre[i] && \
		   !(vtok[i] == ltok[i] + 1 && oh) -> res = OK /* successor: the release landed */ \
		:: else -> res = PRE /* broken, or ambiguous: either way the lease ends */ \
		fi \
	:: else -> skip \
	fi; \
	printf("STEP c%d release done res=%d\n", i, res); \
	endlease(i)
#define REL_DONE2 \
	if \
	:: res == PRE -> readrec(i, o); oh = (rhold == 0) \
	:: else -> skip \
	fi; \
	REL_END
#define REL_DONE \
	if \
	:: res == PRE -> \
		readrec(i, o); \
		oh = (rhold == 0); \
		if \
		:: o != BAD && OWN(i) -> wifv[i] = rver; again = 1 /* an abandoned renewal landed: release over it */ \
		:: else -> REL_END \
		fi \
	:: else -> REL_END \
	fi
inline release(i) {
	atomic {
		hold[i]; relg[i] = 1; busy[i] = 1; printf("STEP c%d releases\n", i);
#ifndef NO_CALLBACK_BEFORE_RELEASE
		bel[i] = 0; /* the context ends before the released record is written */
#endif
		nonce(i); wifv[i] = lver[i]; canon()
	};
#ifdef NO_KEEP_RECORD
	/* the record is deleted: a Delete's outcome is not resolved */
	atomic { sendw(i, DELETE, wifv[i], 0, ABSENT, 0, 0); canon() };
	atomic {
		if
		:: pst[i] == LANDED -> res = OK
		:: pst[i] == REFUSED -> res = PRE
		:: pst[i] == TIMEDOUT -> res = UNK
		fi;
		pst[i] = 0; pres[i] = 0;
		REL_DONE;
		canon()
	};
#else
	PUT(i, (wifv[i] == 0 -> CREATE : REPLACE), ltok[i], RELEASED, 1, REL_DONE);
#endif
	if
	:: again -> PUT(i, REPLACE, ltok[i], RELEASED, 1, REL_DONE2)
	:: else -> skip
	fi;
	atomic { again = 0; tok = 0; o = 0; oh = 0; res = 0; unc = 0; wnon[i] = 0; wifv[i] = 0; wrv[i] = 0; canon() }
}

/* Client.Break */
inline brk(i) {
	atomic {
		readrec(i, o);
		printf("STEP c%d break-reads token=%d state=%d\n", i, rtok, rst);
		if
		:: o == BAD -> tok = 0
		:: else -> tok = (rst != ABSENT -> rtok : highest[i]) + 1
		fi;
		if
		:: tok > MAXTOK -> tok = 0
		:: else -> skip
		fi;
		if
		:: tok != 0 -> breaks++; nonce(i); wifv[i] = rver
		:: else -> skip
		fi;
		o = 0; canon()
	};
	if
	:: tok != 0 -> PUT(i, (wifv[i] == 0 -> CREATE : REPLACE), tok, RELEASED, 0, skip)
	:: else -> skip
	fi;
	atomic { tok = 0; res = 0; unc = 0; wnon[i] = 0; wifv[i] = 0; wrv[i] = 0; canon() }
}

#ifdef DATA
/* fence.Put / fence.Delete: stat, refuse a lower token, conditional write */
inline fenced(i) {
	atomic {
		if
		:: ftok[i] < dtok -> skip /* ErrStale */
		:: else -> fver[i] = dver; tok = 1; printf("STEP c%d fence-stat token=%d\n", i, dtok)
		fi;
		canon()
	};
	if
	:: tok ->
		atomic {
			if
			:: dver == fver[i] -> /* Create if the stat found nothing, else Replace if-match */
				printf("STEP c%d fenced-write-lands token=%d\n", i, ftok[i]);
#ifdef P_FENCE
				assert(ftok[i] >= dmax);
#endif
				if
				:: ftok[i] > dmax -> dmax = ftok[i]
				:: else -> skip
				fi;
				dtok = ftok[i];
				freshdata(); dver = did;
#ifdef NO_UNIQUE_TOMBSTONES
				if
				:: true -> dver = EMPTY /* fence.Delete: an empty tombstone */
				:: true -> skip /* fence.Put with a unique payload */
				fi;
#endif
				skip
			:: else -> skip /* precondition: the caller checks again */
			fi;
			fver[i] = 0; tok = 0; canon()
		}
	:: else -> skip
	fi
}
#endif

proctype Client(byte i) {
	byte o, res, out, att, tok;
	bit unc, oh, again;
#ifdef LIVE
	byte ops;
	if
	:: i == 0 ->
		do
		:: ops < 2 -> tryAcquire(i); ops++
		:: ops < 3 -> renew(i); ops++
		:: ops >= 2 -> break /* dies */
		od
	:: else ->
		do
		:: tryAcquire(i)
		:: hold[i] -> break
		od
	fi
#else
end:	do
	:: tryAcquire(i)
	:: renew(i)
	:: release(i)
	:: breaks < BREAKS -> brk(i)
#ifdef DATA
	:: ftok[i] > 0 -> fenced(i)
#endif
	od
#endif
}

/* the store's own steps, the clocks, and the operator */
#define VALIDITY_ENDS(j) \
	if \
	:: busy[j] -> hold[j] = 0; bel[j] = 0; vend[j] = 1; hel[j] = 0; /* the renewal or release goes on */ \
		printf("STEP c%d validity-ends\n", j) \
	:: else -> endlease(j); printf("STEP c%d validity-ends\n", j) \
	fi
#define STUCK(j) (hold[j] && hel[j] >= HHI)
#if N > 2
#define NOSTUCK (!STUCK(0) && !STUCK(1) && !STUCK(2))
#else
#define NOSTUCK (!STUCK(0) && !STUCK(1))
#endif
#define CAP(x, m) if :: x < m -> x++ :: else -> skip fi
HIDDEN byte ej;
active proctype Env() {
end:	do
	:: atomic { /* a tick of real time */
		NOSTUCK ->
		ej = 0;
		do
		:: ej < N ->
			if
			:: hold[ej] -> CAP(hel[ej], HHI)
			:: else -> skip
			fi;
			if
			:: wnon[ej] != 0 -> CAP(sel[ej], HHI)
			:: else -> skip
			fi;
#ifdef LIVE
			CAP(cel[ej], CHI);
#else
			if
			:: vknown[ej] && vst[ej] == HELD -> CAP(cel[ej], CLO)
			:: else -> skip
			fi;
#endif
			ej++
		:: else -> break
		od;
		ej = 0;
		printf("STEP tick\n");
#ifdef STORECLOCK
		CAP(rage, TTL);
#endif
		skip; canon() }
	/* a holder's validity runs out on its own clock (Lease: ErrLeaseLost) */
	:: atomic { hold[0] && hel[0] >= HLO -> VALIDITY_ENDS(0); canon() }
	:: atomic { hold[1] && hel[1] >= HLO -> VALIDITY_ENDS(1); canon() }
#if N > 2
	:: atomic { hold[2] && hel[2] >= HLO -> VALIDITY_ENDS(2); canon() }
#endif
	/* a request given up on lands late, or never */
	:: LATE(0)
	:: LATE(1)
#if N > 2
	:: LATE(2)
#endif
#ifdef OPERATOR
	/* the operator deletes the record by hand: a new epoch of tokens */
	:: atomic { epoch == 0 && rst != ABSENT ->
		rver = 0; rtok = 0; rst = ABSENT; rhold = 0; rnon = 0; rby = 0;
		printf("STEP operator deletes the record\n");
		epoch = 1; granted = 0; gmax = 0; broke = 0; canon() }
#endif
	od
}

init {
	atomic {
		byte k = 0;
		do
		:: k < N -> name[k] = k + 1; k++
		:: else -> break
		od;
#ifdef TWINS
		name[1] = 1;
#endif
#ifdef FAULTS
		faults = FAULTS;
#endif
		k = 0;
		do
		:: k < N -> run Client(k); k++
		:: else -> break
		od; canon() }
}

#ifdef LIVE
#if N > 2
#define TAKEN (bel[1] || bel[2])
#else
#define TAKEN (bel[1])
#endif
ltl takeover { <> TAKEN }
#endif
