/*
 * sort.h: an in-place sort for arrays of plain records, specialised per type
 * (introsort: quicksort on a median of three, insertion sort for short
 * ranges, heapsort past 2 log2(n) levels, so O(n log n) at worst).
 *
 * Why not qsort(): glibc's qsort is a merge sort that mallocs a copy of the
 * whole array (100 MiB for the host spans of a 1 GB trace, on top of the
 * array) and calls the comparison through a pointer; this needs no memory
 * and inlines LESS. It is not stable: give LESS a total order (break ties on
 * the records' arrival order) and any input order sorts the same.
 *
 *   SORT_DEFINE(sort_hrec, struct hrec, hrec_less)
 *   sort_hrec(v, n);
 * where hrec_less(const struct hrec *a, const struct hrec *b) says a < b.
 */
#ifndef SORT_H
#define SORT_H

#include <stddef.h>

#define SORT_DEFINE(NAME, T, LESS)								\
static void NAME##_insertion(T *v, size_t n)							\
{												\
	for (size_t i = 1; i < n; i++) {							\
		T x = v[i];									\
		size_t j = i;									\
		for (; j > 0 && LESS(&x, &v[j - 1]); j--)					\
			v[j] = v[j - 1];							\
		v[j] = x;									\
	}											\
}												\
												\
static void NAME##_sift(T *v, size_t i, size_t n)						\
{												\
	for (;;) {										\
		size_t c = 2 * i + 1;								\
		T t;										\
		if (c >= n)									\
			return;									\
		if (c + 1 < n && LESS(&v[c], &v[c + 1]))					\
			c++;									\
		if (!LESS(&v[i], &v[c]))							\
			return;									\
		t = v[i];									\
		v[i] = v[c];									\
		v[c] = t;									\
		i = c;										\
	}											\
}												\
												\
static void NAME##_heap(T *v, size_t n)								\
{												\
	for (size_t i = n / 2; i-- > 0;)							\
		NAME##_sift(v, i, n);								\
	for (size_t k = n; k-- > 1;) {								\
		T t = v[0];									\
		v[0] = v[k];									\
		v[k] = t;									\
		NAME##_sift(v, 0, k);								\
	}											\
}												\
												\
static void NAME##_order3(T *v, size_t a, size_t b)						\
{												\
	if (LESS(&v[b], &v[a])) {								\
		T t = v[a];									\
		v[a] = v[b];									\
		v[b] = t;									\
	}											\
}												\
												\
/* Hoare's partition around the median of v[0], v[n/2], v[n-1] (n > 16): both sides	\
 * non-empty, since the pivot's value is in the array between two that bound it. */	\
static void NAME##_intro(T *v, size_t n, int depth)						\
{												\
	while (n > 16) {									\
		size_t m = n / 2, i, j;								\
		T p;										\
		if (depth-- == 0) {								\
			NAME##_heap(v, n);							\
			return;									\
		}										\
		NAME##_order3(v, 0, m);								\
		NAME##_order3(v, m, n - 1);							\
		NAME##_order3(v, 0, m);								\
		p = v[m];									\
		for (i = 0, j = n - 1;; i++, j--) {						\
			T t;									\
			while (LESS(&v[i], &p))							\
				i++;								\
			while (LESS(&p, &v[j]))							\
				j--;								\
			if (i >= j)								\
				break;								\
			t = v[i];								\
			v[i] = v[j];								\
			v[j] = t;								\
		}										\
		/* [0, j] and [j + 1, n): the smaller by recursion, the larger by the loop */	\
		if (j + 1 < n - j - 1) {							\
			NAME##_intro(v, j + 1, depth);						\
			v += j + 1;								\
			n -= j + 1;								\
		} else {									\
			NAME##_intro(v + j + 1, n - j - 1, depth);				\
			n = j + 1;								\
		}										\
	}											\
	NAME##_insertion(v, n);									\
}												\
												\
static void NAME(T *v, size_t n)								\
{												\
	int depth = 0;										\
	for (size_t k = n; k; k >>= 1)								\
		depth += 2;									\
	NAME##_intro(v, n, depth);								\
}

#endif
