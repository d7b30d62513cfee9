import heapq


def shortest_distances(graph, source):
    """Length of the shortest path from ``source`` to every node it can reach.

    ``graph`` maps a node to a list of (neighbour, weight) pairs, weights >= 0. The result maps
    each reachable node (``source`` included, at 0) to its distance.
    """
    dist = {source: 0}
    heap = [(0, source)]
    while heap:
        d, node = heapq.heappop(heap)
        if d > dist[node]:
            continue
        for neighbour, weight in graph.get(node, []):
            nd = d + weight
            if nd < dist.get(neighbour, float("inf")):
                dist[neighbour] = nd
                heapq.heappush(heap, (nd, neighbour))
    return dist
