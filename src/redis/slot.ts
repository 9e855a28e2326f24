/**
 * Redis Cluster's key slot: CRC16 (XMODEM: polynomial 0x1021, initial value 0) of the key's hash
 * tag, or of the whole key when it has none, modulo 16384. The same function as `CLUSTER KEYSLOT`.
 * @internal
 */

export const SLOT_COUNT = 16_384;

/** CRC16 of every byte value, one table built once. */
const TABLE = (() => {
  const table = new Uint16Array(256);
  for (let byte = 0; byte < 256; byte += 1) {
    let crc = byte << 8;
    for (let bit = 0; bit < 8; bit += 1) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
    table[byte] = crc & 0xffff;
  }
  return table;
})();

function crc16(bytes: Uint8Array, from: number, to: number): number {
  let crc = 0;
  for (let i = from; i < to; i += 1) {
    crc = ((crc << 8) & 0xffff) ^ (TABLE[((crc >> 8) ^ (bytes[i] as number)) & 0xff] as number);
  }
  return crc;
}

/** The slot of `key` (0 .. 16383), as `CLUSTER KEYSLOT` gives it. */
export function keySlot(key: string): number {
  const bytes = Buffer.from(key, 'utf8');
  // The tag is found on the bytes: a multi-byte character never contains a brace byte.
  const open = bytes.indexOf(0x7b);
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1);
    if (close !== -1 && close !== open + 1) return crc16(bytes, open + 1, close) % SLOT_COUNT;
  }
  return crc16(bytes, 0, bytes.length) % SLOT_COUNT;
}
