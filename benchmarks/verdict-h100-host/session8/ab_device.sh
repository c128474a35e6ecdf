# whole-process `cpverify verdict` at 10,000 rollouts per arm, trees interleaved: tree wall user+sys
B=$PWD/.whl/bench
export PYTHONPYCACHEPREFIX=/tmp/pycache
cd /tmp
for i in 0 1 2 3 4 5; do
  for t in before after after2; do
    rm -rf /tmp/vo-ab
    PYTHONPATH=$B/$t /usr/bin/time -f "%e %U %S" -o /tmp/ab.time python3 -m cpverify verdict --baseline /tmp/cp1-10000.log --candidate /tmp/cp2-10000.log --out /tmp/vo-ab >/dev/null 2>&1
    [ $i -gt 0 ] && echo "$t $(tail -1 /tmp/ab.time)"
  done
done
