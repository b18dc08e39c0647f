/* Stand-in used by mneme-cc only when the CUDA toolkit ships no cuRAND
 * headers: clang's CUDA runtime wrapper force-includes this header, and
 * nothing in it is needed unless the program itself uses cuRAND (whose real
 * headers, when installed, are found first). */
#pragma once
