"""Offline probe: does a one-hop entity lift help LoCoMo's multi-hop questions?

Usage: python3 entity_lift.py RANKINGS.jsonl [LOCOMO10.json]
  RANKINGS.jsonl: `episodic-eval locomo --rankings` output (the default ranking's top 50 per
  question, in question order).

Entities are read from each turn without a model: runs of capitalised words that do not open
a sentence (speaker names and common words excluded), kept when they occur in 2 turns or
more and in at most `cap` of the conversation's turns. Each turn sharing an entity with one
of the `top` first hits gets a lift of `lam` x the entity's IDF (one hop), added to a
rank-based score of the default ranking. `lam`, `top` and `cap` are chosen on the
development half's multi-hop questions (conversations 1-5); both halves are reported with
the paired 95% bootstrap half-width.
"""
import json, re, sys, math, random
from collections import defaultdict, Counter

data = json.load(open(sys.argv[2] if len(sys.argv) > 2 else '../shared/data/locomo/locomo10.json'))
rank_lines = [json.loads(l) for l in open(sys.argv[1])]

STOP = set("""I A An The And But Or So If When What Who Whom Where Why How Which Yes No Oh Hey Hi Hello
Thanks Thank Wow Well Okay OK Sure That This These Those It Its It's I'm I've I'd I'll You You're
We We're They They're He She His Her My Our Your Their There Here Just Really Also Maybe Yeah Haha
Lol Great Good Nice Awesome Cool Love Congrats Congratulations Absolutely Definitely Totally Same
Let Let's Do Did Does Have Has Had Is Are Was Were Be Been Being Not Don't Can Could Would Should
Will Any Some All Both Each Every Anyway Plus Also Even Still Too Very Much More Most Last Next
First Second Then Now Today Tomorrow Yesterday Monday Tuesday Wednesday Thursday Friday Saturday
Sunday January February March April May June July August September October November December""".split())

def norm_id(t):
    t = t.strip()
    t = re.sub(r'^D:(\d+):', r'D\1:', t)
    m = re.match(r'^D(\d+):(\d+)$', t)
    return (int(m.group(1)), int(m.group(2))) if m else None

def entities(text, speakers):
    out = set()
    # capitalised words not opening a sentence, joined into runs
    toks = re.findall(r"[A-Za-z][A-Za-z'\-]*|[.!?]", text)
    run = []
    start = True
    for tok in toks:
        if tok in '.!?':
            if run: out.add(' '.join(run)); run = []
            start = True; continue
        if tok[0].isupper() and not start and tok not in STOP and tok not in speakers:
            run.append(tok)
        else:
            if run: out.add(' '.join(run)); run = []
        start = False
    if run: out.add(' '.join(run))
    return {e.lower() for e in out}

qi = 0
rows = []
for conv in data:
    sid = conv['sample_id']; c = conv['conversation']
    speakers = {c.get('speaker_a',''), c.get('speaker_b','')}
    turns = {}
    sess = sorted([k for k,v in c.items() if k.startswith('session_') and isinstance(v, list)], key=lambda k:int(k.split('_')[1]))
    for k in sess:
        for t in c[k]:
            key = norm_id(t['dia_id'])
            txt = t['text'] + (' [shares %s]' % t['blip_caption'] if t.get('blip_caption') else '')
            turns[key] = (t['dia_id'], txt)
    ents = {k: entities(v[1], speakers) for k, v in turns.items()}
    df = Counter(e for s in ents.values() for e in s)
    n = len(turns)
    by_ent = defaultdict(set)
    for k, s in ents.items():
        for e in s: by_ent[e].add(k)
    id2key = {v[0]: k for k, v in turns.items()}
    for q in conv['qa']:
        line = rank_lines[qi]; qi += 1
        assert line['tenant'] == sid and line['query'] == q['question'], (line['query'], q['question'])
        gold = set()
        for ev in q.get('evidence', []):
            for part in re.split(r'[;,\s]+', ev):
                k = norm_id(part) if part else None
                if k and k in turns: gold.add(k)
        if not gold: continue
        ranking = [id2key.get(i) or norm_id(i) for i in line['ranking']]
        rows.append(dict(conv=sid, half='dev' if data.index(conv) < 5 else 'test', cat=q.get('category'),
                         gold=gold, ranking=ranking, ents=ents, df=df, n=n, by_ent=by_ent))

def rerank(r, lam, top, cap):
    base = {k: 1.0/(i+10) for i, k in enumerate(r['ranking'])}
    lift = defaultdict(float)
    for h in r['ranking'][:top]:
        for e in r['ents'].get(h, ()):
            d = r['df'][e]
            if d > cap * r['n'] or d < 2: continue
            w = math.log(r['n']/d)
            for k in r['by_ent'][e]:
                if k != h: lift[k] += w
    cand = set(base) | set(lift)
    score = {k: base.get(k, 0.0) + lam * lift.get(k, 0.0) / 100 for k in cand}
    return sorted(cand, key=lambda k: -score[k])

def recall(rows, f, at=10):
    return sum(len(set(f(r)[:at]) & r['gold'])/len(r['gold']) for r in rows) / len(rows)

def boot(rows, f, g, at=10, B=1000):
    d = [len(set(f(r)[:at]) & r['gold'])/len(r['gold']) - len(set(g(r)[:at]) & r['gold'])/len(r['gold']) for r in rows]
    random.seed(7); m = sum(d)/len(d)
    ms = sorted(sum(random.choice(d) for _ in d)/len(d) for _ in range(B))
    return m, (ms[int(0.975*B)] - ms[int(0.025*B)])/2

base = lambda r: r['ranking']
for half in ('dev', 'test'):
    for cat, name in ((1, 'multi-hop'), (None, 'all')):
        rs = [r for r in rows if r['half'] == half and (cat is None or r['cat'] == cat)]
        print(half, name, len(rs), 'base R@10 %.1f' % (100*recall(rs, base)))
best = None
for lam in (0.5, 1, 2, 4, 8):
    for top in (1, 3, 5):
        for cap in (0.01, 0.02, 0.05):
            f = lambda r, lam=lam, top=top, cap=cap: rerank(r, lam, top, cap)
            dev_mh = [r for r in rows if r['half']=='dev' and r['cat']==1]
            dev_all = [r for r in rows if r['half']=='dev']
            m, h = boot(dev_mh, f, base)
            ma, ha = boot(dev_all, f, base)
            if best is None or m > best[0]: best = (m, lam, top, cap)
            print('lam %s top %s cap %s: dev multi-hop %+.1f±%.1f, dev all %+.1f±%.1f' % (lam, top, cap, 100*m, 100*h, 100*ma, 100*ha))
m, lam, top, cap = best
f = lambda r: rerank(r, lam, top, cap)
for half in ('dev', 'test'):
    for cat, name in ((1, 'multi-hop'), (None, 'all')):
        rs = [r for r in rows if r['half'] == half and (cat is None or r['cat'] == cat)]
        d, h = boot(rs, f, base)
        print('chosen lam %s top %s cap %s: %s %s R@10 %.1f -> %.1f (%+.1f±%.1f)' % (lam, top, cap, half, name, 100*recall(rs, base), 100*recall(rs, f), 100*d, 100*h))
