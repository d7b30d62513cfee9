import itertools, random
from paths import shortest_distances

def bellman(graph, source, nodes):
    dist = {source: 0}
    for _ in nodes:
        for u in list(dist):
            for v, w in graph.get(u, []):
                if dist[u] + w < dist.get(v, float("inf")):
                    dist[v] = dist[u] + w
    return dist

assert shortest_distances({"a": [("b", 4), ("c", 1)], "c": [("b", 1)], "b": [("d", 1)]}, "a") == {"a": 0, "b": 2, "c": 1, "d": 3}
rng = random.Random(3)
for _ in range(200):
    nodes = range(6)
    graph = {u: [(v, rng.randrange(1, 9)) for v in nodes if v != u and rng.random() < 0.4] for u in nodes}
    assert shortest_distances(graph, 0) == bellman(graph, 0, nodes), graph
