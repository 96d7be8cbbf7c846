// Iteration orders of the JDK's own HashMap and ConcurrentHashMap, for
// tests/model/test_javamap_vs_jdk.py. Run as a source file: java JavaMaps.java
//
// Input: one case a line, "<HashMap|ConcurrentHashMap> <initial capacity> <op> <op> ...", each op
// "+<hex of the key's UTF-8>" (put) or "-<hex>" (remove). Output: one line a case, the keys in
// iteration order after each op (hex, comma separated), the ops' orders separated by ";".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

public class JavaMaps {
    static String hex(String text) {
        StringBuilder out = new StringBuilder();
        for (byte b : text.getBytes(StandardCharsets.UTF_8)) {
            out.append(String.format("%02x", b));
        }
        return out.toString();
    }

    static String text(String hex) {
        byte[] out = new byte[hex.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        }
        return new String(out, StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split(" ");
            int capacity = Integer.parseInt(parts[1]);
            Map<String, Integer> map = parts[0].equals("HashMap") ? new HashMap<>(capacity) : new ConcurrentHashMap<>(capacity);
            for (int i = 2; i < parts.length; i++) {
                String key = text(parts[i].substring(1));
                if (parts[i].charAt(0) == '+') {
                    map.put(key, i);
                } else {
                    map.remove(key);
                }
                StringBuilder order = new StringBuilder();
                for (String k : map.keySet()) {
                    if (order.length() > 0) {
                        order.append(',');
                    }
                    order.append(hex(k));
                }
                out.append(i > 2 ? ";" : "").append(order);
            }
            out.append('\n');
        }
        System.out.print(out);
    }
}
